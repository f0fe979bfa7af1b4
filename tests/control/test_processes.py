"""Two processes, one store: B sees A's tasks and controls them through commands.

Real processes on one SQLite file and on PostgreSQL: the history of a task
held by A records B's pause, resume and stop with B's reason, as the seed's
ops console shows.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskStatus
from chongming.state import audit_history
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from tests.stores.pg_support import REPO, drop_schema, fresh_name, require_postgres

S = TaskStatus


class Node:
    """A node process (tests/control/node_main.py) and its output lines."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.control.node_main", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    async def line(self, timeout: float = 30) -> str:
        assert self.process.stdout is not None
        text = await asyncio.wait_for(asyncio.to_thread(self.process.stdout.readline), timeout)
        if not text:
            _, err = self.process.communicate(timeout=10)
            raise AssertionError(f"node ended early: {err[-3000:]}")
        return text.strip()

    async def finish(self, timeout: float = 30) -> dict[str, str]:
        outcomes: dict[str, str] = json.loads(await self.line(timeout))
        code = await asyncio.to_thread(self.process.wait, timeout)
        assert code == 0, self.process.stderr.read() if self.process.stderr else ""
        return outcomes

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=10)


@pytest.fixture(params=["sqlite", "postgres"])
async def shared(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[list[str], TaskStore]]:
    """Arguments naming the shared store for a node, and a store of our own on it."""
    if request.param == "sqlite":
        path = str(tmp_path / "shared.db")
        from chongming import SqliteTaskStore

        async with SqliteTaskStore(path) as store:
            yield ["--db", path], store
        return
    dsn = require_postgres()
    from chongming.stores.postgres import PostgresTaskStore

    schema = fresh_name("ctl")
    try:
        async with PostgresTaskStore(dsn, schema=schema) as store:
            yield ["--db", dsn, "--schema", schema], store
    finally:
        await drop_schema(schema)


async def wait_stored(
    store: TaskStore, task_id: str, status: TaskStatus, timeout: float = 10
) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        snapshot = await store.get(task_id)
        if snapshot is not None and snapshot.status is status:
            return snapshot
        assert asyncio.get_running_loop().time() < deadline, (
            f"{task_id} never became {status}: {snapshot and snapshot.status}"
        )
        await asyncio.sleep(0.01)


async def test_b_pauses_resumes_and_stops_a_task_held_by_a(
    shared: tuple[list[str], TaskStore],
) -> None:
    args, store = shared
    node = Node(*args, "--owner", "node-a", "--tasks", "3")
    try:
        assert await node.line() == "ready"
        async with Controller(store=store, owner="ops-b", poll_interval=0.05) as ops:
            listed = await ops.list_tasks()
            assert sorted(s.task_id for s in listed) == ["job-0", "job-1", "job-2"]
            assert {(s.status, s.owner) for s in listed} == {(S.RUNNING, "node-a")}
            assert await ops.pause("job-0", reason="maintenance") is False  # unconfirmed
            await wait_stored(store, "job-0", S.PAUSED)
            assert await ops.resume("job-0") is False
            await wait_stored(store, "job-0", S.RUNNING)
            assert await ops.stop("job-0", reason="from the ops console") is True
            await wait_stored(store, "job-0", S.STOPPED)
            assert await ops.stop_all(reason="done") == 0  # B holds nothing itself
            for task_id in ("job-1", "job-2"):
                await ops.stop(task_id, reason="cleanup")
        outcomes = await node.finish()
    finally:
        node.kill()
    assert outcomes == {"job-0": "stopped", "job-1": "stopped", "job-2": "stopped"}
    history = await store.history("job-0")
    steps = [(t.from_status, t.to_status, t.trigger, t.reason) for t in history]
    assert (S.RUNNING, S.PAUSING, Trigger.USER_PAUSE, "maintenance") in steps
    assert (S.PAUSING, S.PAUSED, Trigger.PAUSE_REACHED, None) in steps
    assert (S.PAUSED, S.RUNNING, Trigger.USER_RESUME, None) in steps
    assert steps[-2:] == [
        (S.RUNNING, S.STOPPING, Trigger.USER_STOP, "from the ops console"),
        (S.STOPPING, S.STOPPED, Trigger.STOP_CONFIRMED, "from the ops console"),
    ]
    snapshot = await store.get("job-0")
    assert snapshot is not None
    assert audit_history(snapshot, history) == []
