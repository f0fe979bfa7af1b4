"""``chongming run`` in one process, controlled from others: on SQLite and on PostgreSQL.

This is the walkthrough of docs/cli.md as real processes: a terminal runs a
task in the foreground; a second terminal finds it with ``ps``, pauses,
resumes and stops it through the shared store; the running process exits 3
(its task did not succeed) and ``history`` shows who did what and why.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_processes import _Lines
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0
TASKS = "tests.cli.cli_tasks"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.fixture(params=["sqlite", "postgres"])
def plane(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """The global options that name one shared store."""
    if request.param == "sqlite":
        yield ["--db", str(tmp_path / "tasks.db")]
        return
    dsn = require_postgres()
    schema = fresh_name("cli")
    try:
        yield ["--db", dsn, "--schema", schema]
    finally:
        asyncio.run(drop_schema(schema))


def cli(plane: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chongming", *plane, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env=_env(),
    )


def stored(plane: list[str], task_id: str) -> dict[str, Any]:
    result = cli(plane, "status", task_id, "--json")
    assert result.returncode in (0, 3), result.stderr
    task: dict[str, Any] = json.loads(result.stdout)["task"]
    return task


def wait_status(plane: list[str], task_id: str, wanted: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    task = stored(plane, task_id)
    while task["status"] != wanted:
        assert time.monotonic() < deadline, f"{task_id} stayed {task['status']}, wanted {wanted}"
        time.sleep(0.05)
        task = stored(plane, task_id)
    return task


def test_run_in_one_terminal_control_from_another(plane: list[str]) -> None:
    run = ["run", "--tasks", TASKS, "loops", "--task-id", "w-1", "--label", "夜间同步"]
    runner = subprocess.Popen(
        [sys.executable, "-m", "chongming", *plane, "--owner", "terminal-1", *run],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
        env=_env(),
    )
    try:
        lines = _Lines(runner)
        while not lines.next().startswith("w-1  running"):
            pass

        ps = cli(plane, "ps")
        assert ps.returncode == 0, ps.stderr
        header, _, row = ps.stdout.splitlines()[:3]
        assert header.split()[:3] == ["TASK_ID", "NAME", "STATUS"]
        assert row.split()[:3] == ["w-1", "夜间同步", "running"]
        nodes = json.loads(cli(plane, "nodes", "--json").stdout)["nodes"]
        assert [(n["owner"], n["live"]) for n in nodes] == [("terminal-1", True)]

        paused = cli(plane, "pause", "w-1", "--reason", "maintenance")
        assert paused.returncode == 0, paused.stderr
        assert paused.stdout.strip() == "pause requested for w-1 (addressed to terminal-1)"
        wait_status(plane, "w-1", "paused")
        beats = stored(plane, "w-1")["progress"]["done"]

        resumed = cli(plane, "resume", "w-1")
        assert resumed.returncode == 0, resumed.stderr
        wait_status(plane, "w-1", "running")

        stopped = cli(plane, "stop", "w-1", "--reason", "release window")
        assert stopped.returncode == 0, stopped.stderr
        assert runner.wait(timeout=DEADLINE) == 3  # the task it ran did not succeed
        rest = runner.stdout.read().decode() if runner.stdout else ""
        assert rest.splitlines()[-1].startswith("w-1 stopped after ")
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=DEADLINE)
        for stream in (runner.stdout, runner.stderr):
            if stream is not None:
                stream.close()

    task = stored(plane, "w-1")
    assert task["status"] == "stopped"
    assert task["progress"]["done"] >= beats  # progress was written through
    history = json.loads(cli(plane, "history", "w-1", "--json").stdout)["transitions"]
    steps = [(t["from"], t["to"], t["trigger"], t["actor"], t["reason"]) for t in history]
    assert ("running", "pausing", "user:pause", "user", "maintenance") in steps
    assert ("pausing", "paused", "runtime:pause_reached", "system", None) in steps
    assert ("paused", "running", "user:resume", "user", None) in steps
    assert steps[-2:] == [
        ("running", "stopping", "user:stop", "user", "release window"),
        ("stopping", "stopped", "runtime:stop_confirmed", "system", "release window"),
    ]
    assert cli(plane, "status", "w-1").returncode == 3
    nodes = json.loads(cli(plane, "nodes", "--json").stdout)["nodes"]
    assert [(n["owner"], n["live"]) for n in nodes] == [("terminal-1", False)]
    commands = json.loads(cli(plane, "commands", "w-1", "--json").stdout)["commands"]
    assert [c["kind"] for c in commands] == ["stop", "resume", "pause"]
    assert {c["state"] for c in commands} == {"done"}


def test_run_exit_codes_as_processes(plane: list[str]) -> None:
    ok = cli(plane, "run", "--tasks", TASKS, "double", "--arg", "value=21", "--task-id", "ok")
    assert (ok.returncode, ok.stdout.splitlines()[-1].endswith("; result: 42")) == (0, True)
    bad = cli(plane, "run", "--tasks", TASKS, "boom", "--task-id", "bad")
    assert bad.returncode == 3, bad.stderr
    unknown = cli(plane, "run", "--tasks", TASKS, "nope")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("chongming: error: ")
    assert "Traceback" not in unknown.stderr
    assert cli(plane, "run", "--tasks", TASKS).returncode == 2  # usage: no task name
    listed = json.loads(cli(plane, "ps", "--all", "--json").stdout)["tasks"]
    assert sorted((t["task_id"], t["status"]) for t in listed) == [
        ("bad", "failed"),
        ("ok", "succeeded"),
    ]
