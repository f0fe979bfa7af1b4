"""Helpers for the control-plane tests that run real node processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from chongming import TaskStatus
from chongming.stores.base import TaskStore
from tests.stores.pg_support import REPO, drop_schema, fresh_name, require_postgres


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

    async def finish(self, timeout: float = 30) -> dict[str, Any]:
        outcomes: dict[str, Any] = json.loads(await self.line(timeout))
        code = await asyncio.to_thread(self.process.wait, timeout)
        assert code == 0, self.process.stderr.read() if self.process.stderr else ""
        return outcomes

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=10)


async def open_shared(kind: str, tmp_path: Path) -> AsyncIterator[tuple[list[str], TaskStore]]:
    """Arguments naming the shared store for a node, and a store of our own on it."""
    if kind == "sqlite":
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
