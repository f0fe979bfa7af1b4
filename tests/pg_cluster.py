"""A throwaway PostgreSQL cluster for fault tests that crash and restart the server.

:func:`throwaway_cluster` runs ``initdb`` into a fresh temp dir (as the
``postgres`` OS user when the tests run as root: ``initdb`` and ``postgres``
refuse root), starts the server on a free loopback port with trust auth, and
always stops it (``pg_ctl -m immediate``, then the postmaster's own pid if
that failed) and removes the directory at the end, whatever happened inside.
:meth:`PgCluster.crash` is ``pg_ctl stop -m immediate`` (every backend is
killed at once, no checkpoint: the next start runs crash recovery), and
:meth:`PgCluster.start` brings it back on the same port.

Never the shared server: a test that needs to take the server away takes its
own. Without server binaries (``/usr/lib/postgresql/*/bin``) the fixture
skips, saying so; any other failure to make the cluster fails the test.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

from tests.stores.pg_support import REQUIRED

__all__ = ["PgCluster", "pg_binaries", "pg_cluster", "throwaway_cluster"]

_START_TIMEOUT = 30
_NEEDED = ("initdb", "pg_ctl", "postgres")


def pg_binaries() -> str | None:
    """The newest ``bin`` dir holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``."""
    found = sorted(
        os.path.dirname(path)
        for path in glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")
        if all(os.access(os.path.join(os.path.dirname(path), b), os.X_OK) for b in _NEEDED)
    )
    return found[-1] if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgCluster:
    """One throwaway cluster: its data dir, its port, how to stop and start it."""

    def __init__(self, bindir: str, base: str, as_user: list[str]) -> None:
        self.bindir = bindir
        self.base = base
        self.datadir = os.path.join(base, "data")
        self.log = os.path.join(base, "server.log")
        self.port = _free_port()
        self.as_user = as_user
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.crashes = 0

    def _run(self, *command: str, timeout: float) -> None:
        try:
            subprocess.run(
                [*self.as_user, *command], check=True, capture_output=True, timeout=timeout
            )
        except subprocess.CalledProcessError as error:
            said = (error.stderr or b"").decode(errors="replace").strip()
            raise AssertionError(
                f"{os.path.basename(command[0])} failed ({error.returncode}): {said}\n"
                f"server log:\n{self.log_tail()}"
            ) from None

    def pg_ctl(self, *args: str, timeout: float = _START_TIMEOUT + 30) -> None:
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1"
        self._run(
            f"{self.bindir}/pg_ctl",
            *("-D", self.datadir, "-w", "-t", str(_START_TIMEOUT)),
            *("-o", options, "-l", self.log),
            *args,
            timeout=timeout,
        )

    def initdb(self) -> None:
        self._run(
            f"{self.bindir}/initdb",
            *("-D", self.datadir, "-A", "trust", "-U", "postgres", "--no-sync"),
            timeout=120,
        )

    def start(self) -> None:
        """Start the server on its port; returns once it accepts connections (``-w``)."""
        self.pg_ctl("start")

    def crash(self) -> None:
        """``pg_ctl stop -m immediate``: every server process quits at once, no checkpoint."""
        self.pg_ctl("stop", "-m", "immediate")
        self.crashes += 1

    @property
    def running(self) -> bool:
        return self._postmaster_pid() is not None

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log, errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return "(no server log)"

    def _postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.datadir, "postmaster.pid")) as pidfile:
                pid = int(pidfile.readline().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # not ours to signal, so alive
            return pid
        return pid

    def destroy(self) -> None:
        """Stop the server however it can be stopped, then remove every file."""
        if self._postmaster_pid() is not None:
            with contextlib.suppress(Exception):
                self.pg_ctl("stop", "-m", "immediate", timeout=30)
        pid = self._postmaster_pid()
        if pid is not None:  # pg_ctl could not stop it: the postmaster this cluster started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)
            deadline = time.monotonic() + 10
            while self._postmaster_pid() is not None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._postmaster_pid() is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)


def _as_postgres() -> tuple[list[str], pwd.struct_passwd | None]:
    if os.geteuid() != 0:
        return [], None
    try:
        account = pwd.getpwnam("postgres")
    except KeyError:
        pytest.fail("running as root, and there is no postgres OS user to run initdb as")
    runner = shutil.which("runuser")
    if runner is None:
        pytest.fail("running as root, and runuser is missing (initdb refuses root)")
    return [runner, "-u", "postgres", "--"], account


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[PgCluster]:
    """A started cluster of its own; stopped and removed at the end, even on failure."""
    bindir = pg_binaries()
    if bindir is None:
        reason = "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql"
        if REQUIRED:  # CI: the restart proofs must run, never skip
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    as_user, account = _as_postgres()
    base = tempfile.mkdtemp(prefix="chongming-pg-")
    cluster = PgCluster(bindir, base, as_user)
    try:
        if account is not None:
            os.chown(base, account.pw_uid, account.pw_gid)
        cluster.initdb()
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_cluster() -> Iterator[PgCluster]:
    """A throwaway cluster for one test (see :func:`throwaway_cluster`)."""
    with throwaway_cluster() as cluster:
        yield cluster
