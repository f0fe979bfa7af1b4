"""``chongming run`` on a real pseudo-terminal: the live progress line and Ctrl-C.

The child gets the pty as its controlling terminal (``os.login_tty``), so
writing ``^C`` to the master side makes the terminal's line discipline send
SIGINT to it, exactly as a key press would.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0
CTRL_C = b"\x03"
_LAUNCH = (
    "import os, sys; os.login_tty(int(sys.argv[1])); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)

pytestmark = pytest.mark.skipif(not hasattr(os, "login_tty"), reason="needs os.login_tty (POSIX)")


class Terminal:
    """A child process on a pty, and everything it has written so far."""

    def __init__(self, *args: str) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "NO_COLOR")}
        env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="140")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, str(slave), "-m", "chongming", *args],
            pass_fds=(slave,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
        )
        os.close(slave)
        self.master = master
        self.output = b""

    def expect(self, text: bytes, timeout: float = DEADLINE) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; so far {self.output[-2000:]!r}"
            if not self._read(min(left, 0.2)) and self.process.poll() is not None:
                assert text in self.output, f"exited without {text!r}: {self.output[-2000:]!r}"

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.output += chunk
        return bool(chunk)

    def press(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait(self, timeout: float = DEADLINE) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            assert time.monotonic() < deadline, f"still running; output {self.output[-2000:]!r}"
            self._read(0.1)
        while self._read(0.05):
            pass
        return self.process.returncode

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE)
        os.close(self.master)


def _history(db: Path, task_id: str) -> list[dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-m", "chongming", "--db", str(db), "history", task_id, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    transitions: list[dict[str, object]] = json.loads(result.stdout)["transitions"]
    return transitions


def test_live_progress_line_and_one_ctrl_c_stops(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    term = Terminal(
        "--db", str(db), "run", "--tasks", "tests.cli.cli_tasks", "loops", "--task-id", "live-1"
    )
    try:
        term.expect(b"running")
        term.expect(b"beats")
        term.expect("━".encode())  # rich's bar: a live line, not plain lines
        assert b"\r" in term.output  # redrawn in place
        term.press(CTRL_C)
        term.expect(b"Ctrl-C: stop requested")
        assert term.wait() == 3
    finally:
        term.close()
    assert b"live-1 stopped after " in term.output
    steps = [(t["to"], t["trigger"], t["reason"]) for t in _history(db, "live-1")]
    assert steps[-2:] == [
        ("stopping", "user:stop", "Ctrl-C in the terminal running it"),
        ("stopped", "runtime:stop_confirmed", "Ctrl-C in the terminal running it"),
    ]


def test_second_ctrl_c_forces_and_a_deaf_thread_is_recorded_lost(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    term = Terminal(
        "--db", str(db), "run", "--tasks", "tests.cli.cli_tasks", "deaf", "--task-id", "deaf-1"
    )
    try:
        term.expect(b"not listening")
        term.press(CTRL_C)
        term.expect(b"press Ctrl-C again to force")
        term.press(CTRL_C)
        term.expect(b"forcing the stop now")
        started = time.monotonic()
        assert term.wait() == 3
        # the default stop grace is 5 s and the thread would nap for 60: forced means now
        assert time.monotonic() - started < 4.5
    finally:
        term.close()
    assert b"deaf-1 lost after" in term.output
    steps = [(t["to"], t["trigger"]) for t in _history(db, "deaf-1")]
    assert steps[-2:] == [("stopping", "user:stop"), ("lost", "runtime:stop_abandoned")]
