"""The CLI as real processes against a node process on one SQLite file.

A node (``tests.control.node_main``) runs a looping task ``job-0``; separate
``python -m chongming`` processes pause, resume and stop it through the
store, and ``history`` then shows the whole round trip with its reason.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "CHONGMING_DB"}
    env["PYTHONPATH"] = str(ROOT)
    return env


class _Lines:
    """Whole lines from an unbuffered pipe, each waited for with a deadline."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self._fd = process.stdout.fileno()
        self._buffer = b""

    def next(self, timeout: float = DEADLINE) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no line within {timeout}s (so far {self._buffer!r})"
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready:
                chunk = os.read(self._fd, 65536)
                assert chunk, f"the node exited (so far {self._buffer!r})"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chongming", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env=_env(),
    )


def status_of(db: Path, task_id: str) -> str:
    result = cli(db, "status", task_id, "--json")
    assert result.returncode in (0, 3), result.stderr
    task: dict[str, Any] = json.loads(result.stdout)["task"]
    return str(task["status"])


def wait_status(db: Path, task_id: str, wanted: str) -> None:
    deadline = time.monotonic() + DEADLINE
    seen = status_of(db, task_id)
    while seen != wanted:
        assert time.monotonic() < deadline, f"{task_id} stayed {seen}, wanted {wanted}"
        time.sleep(0.05)
        seen = status_of(db, task_id)


def test_pause_resume_stop_from_other_processes(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    node = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.control.node_main",
            "--db",
            str(db),
            "--owner",
            "node-a",
            "--tasks",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
        env=_env(),
    )
    try:
        lines = _Lines(node)
        assert lines.next() == "ack job-0"
        assert lines.next() == "ready"

        ps = cli(db, "ps")
        assert ps.returncode == 0, ps.stderr
        row = ps.stdout.splitlines()[2].split()
        assert row[0] == "job-0"
        assert "running" in row
        assert ps.stdout.splitlines()[-1] == "    active 1 (queued 0, holding a slot 1)"
        assert [n["owner"] for n in json.loads(cli(db, "nodes", "--json").stdout)["nodes"]] == [
            "node-a"
        ]

        paused = cli(db, "pause", "job-0", "--reason", "maintenance")
        assert paused.returncode == 0, paused.stderr
        assert paused.stdout.strip() == "pause requested for job-0 (addressed to node-a)"
        wait_status(db, "job-0", "paused")
        assert cli(db, "status", "job-0").returncode == 0  # paused is not a failure

        resumed = cli(db, "resume", "job-0")
        assert resumed.returncode == 0, resumed.stderr
        wait_status(db, "job-0", "running")

        stopped = cli(db, "--json", "stop", "job-0", "--reason", "x")
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout) == {
            "task_id": "job-0",
            "command": "stop",
            "issued": True,
            "status": "running",
            "owner": "node-a",
        }
        report = json.loads(lines.next())
        assert report == {"outcomes": {"job-0": "stopped"}, "let_go": []}
        assert node.wait(timeout=DEADLINE) == 0
    finally:
        if node.poll() is None:
            node.kill()
            node.wait(timeout=DEADLINE)
        assert node.stdout is not None
        assert node.stderr is not None
        node.stdout.close()
        node.stderr.close()

    history = cli(db, "history", "job-0")
    assert history.returncode == 0, history.stderr
    rows = [line.split() for line in history.stdout.splitlines()[2:]]
    steps = [(row[1], row[2], row[4], row[6]) for row in rows]
    assert ("running", "pausing", "user:pause", "maintenance") in steps
    assert ("pausing", "paused", "runtime:pause_reached", "-") in steps
    assert ("paused", "running", "user:resume", "-") in steps
    assert steps[-2:] == [
        ("running", "stopping", "user:stop", "x"),
        ("stopping", "stopped", "runtime:stop_confirmed", "x"),
    ]
    pause_at = steps.index(("running", "pausing", "user:pause", "maintenance"))
    resume_at = steps.index(("paused", "running", "user:resume", "-"))
    assert pause_at < resume_at < len(steps) - 2

    assert cli(db, "status", "job-0").returncode == 3  # stopped: did not succeed
    again = cli(db, "stop", "job-0")
    assert again.returncode == 3
    assert "already ended (stopped)" in again.stdout

    commands = json.loads(cli(db, "commands", "job-0", "--json").stdout)["commands"]
    assert [c["kind"] for c in commands] == ["stop", "resume", "pause"]  # newest first
    assert {c["state"] for c in commands} == {"done"}
    assert [c["outcome"] for c in commands] == [
        "applied: stopping",
        "applied: resumed",
        "applied: paused",
    ]
    assert all(c["target_owner"] == "node-a" for c in commands)
    assert cli(db, "ps").stdout.splitlines()[-1] == "    active 0 (queued 0, holding a slot 0)"
