"""A PostgreSQL server restarted mid-run (``pg_ctl -m immediate restart``).

Runs against a throwaway cluster (``initdb`` into a temp dir as the
``postgres`` OS user, on a free loopback port), never the shared server.
Pass marks from docs/reliability.md: no acknowledged transition lost; writes
resume within 10 s of the server accepting connections again.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import NoReturn

import pytest

from chongming.errors import StoreUnavailable, VersionConflict
from chongming.state.audit import audit_history
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.testing.store_contract import make_snapshot, next_step
from tests.stores.pg_support import REQUIRED, reread

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

_S = TaskStatus
_CYCLE = {_S.RUNNING: _S.PAUSING, _S.PAUSING: _S.RUNNING}
_START = {_S.PENDING: _S.QUEUED, _S.QUEUED: _S.STARTING, _S.STARTING: _S.RUNNING}


def _unavailable(reason: str) -> NoReturn:
    if REQUIRED:
        pytest.fail(f"throwaway cluster unavailable: {reason}", pytrace=False)
    pytest.skip(f"throwaway cluster unavailable: {reason}")


def _binaries() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        _unavailable("no PostgreSQL server binaries under /usr/lib/postgresql")
    return os.path.dirname(found[-1])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    def __init__(self, bindir: str, datadir: str, port: int, as_user: list[str]) -> None:
        self.bindir = bindir
        self.datadir = datadir
        self.port = port
        self.as_user = as_user
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def pg_ctl(self, *args: str, timeout: float = 60) -> None:
        command = [
            *self.as_user,
            f"{self.bindir}/pg_ctl",
            "-D",
            self.datadir,
            "-w",
            "-t",
            "30",
            "-o",
            f"-p {self.port} -k {self.datadir} -c listen_addresses=127.0.0.1",
            "-l",
            f"{self.datadir}/server.log",
            *args,
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=timeout)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    bindir = _binaries()
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no postgres OS user")
        runner = shutil.which("runuser")
        if runner is None:
            _unavailable("runuser is missing")
        as_user = [runner, "-u", "postgres", "--"]
    else:
        account = None
        as_user = []
    base = tempfile.mkdtemp(prefix="chongming-pg-")
    datadir = os.path.join(base, "data")
    os.mkdir(datadir, 0o700)
    if account is not None:
        os.chown(base, account.pw_uid, account.pw_gid)
        os.chown(datadir, account.pw_uid, account.pw_gid)
    cluster = Cluster(bindir, datadir, _free_port(), as_user)
    try:
        subprocess.run(
            [*as_user, f"{bindir}/initdb", "-D", datadir, "-A", "trust", "-U", "postgres"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        cluster.pg_ctl("start")
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(base, ignore_errors=True)


async def test_server_restart_loses_no_acknowledged_transition(cluster: Cluster) -> None:
    from chongming.stores.postgres import PostgresTaskStore

    store = PostgresTaskStore(cluster.dsn, schema="restart_test", min_size=1, max_size=4)
    acked: list[Transition] = []
    stop = asyncio.Event()
    accepting_again: list[float] = []
    first_ack_after: list[float] = []

    async def writer(task_id: str) -> None:
        current = make_snapshot(task_id)
        while True:
            try:
                await store.create(current)
                break
            except StoreUnavailable:
                await asyncio.sleep(0.05)
        while not stop.is_set():
            target = _START.get(current.status) or _CYCLE[current.status]
            new, transition = next_step(current, target)
            try:
                await store.save(
                    new, expect_version=current.status_version, transitions=[transition]
                )
            except (StoreUnavailable, VersionConflict):
                current = await reread(store, task_id)  # outcome unknown: look, then carry on
                continue
            acked.append(transition)
            if accepting_again and not first_ack_after:
                first_ack_after.append(time.monotonic())
            current = new
            await asyncio.sleep(0.005)

    async def started_at() -> object:
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(cluster.dsn, timeout=10)
        try:
            return await conn.fetchval("SELECT pg_postmaster_start_time()")
        finally:
            await conn.close()

    async def restarter() -> None:
        await asyncio.sleep(1.0)
        before = len(acked)
        first_start = await started_at()
        await asyncio.to_thread(cluster.pg_ctl, "restart", "-m", "immediate")
        accepting_again.append(time.monotonic())  # pg_ctl -w returns once it accepts
        assert await started_at() != first_start  # the server really went down and came back
        assert before > 0
        while not first_ack_after and time.monotonic() - accepting_again[0] < 15:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        stop.set()

    try:
        await asyncio.wait_for(
            asyncio.gather(restarter(), *(writer(f"r-{i}") for i in range(6))), 90
        )
        assert first_ack_after, "no write succeeded after the restart"
        resumed_after = first_ack_after[0] - accepting_again[0]
        assert resumed_after <= 10, f"writes resumed {resumed_after:.1f} s after the restart"
        for i in range(6):
            task_id = f"r-{i}"
            snapshot = await store.get(task_id)
            assert snapshot is not None
            history = await store.history(task_id)
            assert audit_history(snapshot, history) == []
            stored = {t.version: t for t in history}
            for transition in (t for t in acked if t.task_id == task_id):
                assert stored.get(transition.version) == transition  # acknowledged => durable
    finally:
        await store.close()
