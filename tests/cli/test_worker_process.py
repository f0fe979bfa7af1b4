"""``chongming worker`` as a process: it drains what a client enqueues, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chongming import Controller, TaskStatus
from chongming.stores.base import TaskStore
from tests.cli.test_processes import _Lines
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


@pytest.fixture(params=["sqlite", "postgres"])
def plane(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[str], object]]:
    """CLI options naming one shared store, and what a client opens it with."""
    if request.param == "sqlite":
        path = tmp_path / "tasks.db"
        yield ["--db", str(path)], path
        return
    dsn = require_postgres()
    schema = fresh_name("wrk")
    try:
        yield ["--db", dsn, "--schema", schema], (dsn, schema)
    finally:
        asyncio.run(drop_schema(schema))


def _client_store(where: object) -> TaskStore | Path:
    if isinstance(where, Path):
        return where
    from chongming.stores.postgres import PostgresTaskStore

    assert isinstance(where, tuple)
    dsn, schema = where
    return PostgresTaskStore(str(dsn), schema=str(schema))


def _start(options: list[str], *args: str, owner: str = "worker-a") -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["worker", "--tasks", "tests.cli.cli_tasks", *args]
    return subprocess.Popen(
        [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
        env=env,
    )


def _finish(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=DEADLINE)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


async def test_a_worker_process_drains_the_queue_and_stops_on_sigterm(
    plane: tuple[list[str], object],
) -> None:
    options, where = plane
    worker = _start(options, "--max-parallel", "4")
    try:
        lines = _Lines(worker)
        first = await asyncio.to_thread(lines.next)
        assert first.startswith(
            "worker worker-a serving boom, deaf, double, echo, loops, mark, steps, versioned"
        )
        store = _client_store(where)
        client = Controller(store=store, owner="client")
        async with client:
            queued = [await client.enqueue("double", n, task_id=f"d-{n:02d}") for n in range(30)]
            finals = [await task.wait(timeout=DEADLINE) for task in queued]
            assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 30
            assert [f.result for f in finals] == [2 * n for n in range(30)]
            assert {f.owner for f in finals} == {"worker-a"}
            nodes = await client.nodes()
            assert [(n.info.owner, n.live) for n in nodes] == [("worker-a", True)]
            worker.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(worker.wait, DEADLINE) == 0
            assert [(n.info.owner, n.live) for n in await client.nodes()] == [("worker-a", False)]
            await client.close(close_store=True)
        rest = worker.stdout.read().decode() if worker.stdout else ""
        assert "stopping: claiming no more" in rest
        assert rest.strip().splitlines()[-1] == "worker worker-a stopped"
    finally:
        _finish(worker)


async def test_sigterm_stops_running_tasks_after_the_grace(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    worker = _start(["--db", str(db)], "--grace", "0.5")
    try:
        lines = _Lines(worker)
        await asyncio.to_thread(lines.next)
        async with Controller(store=db, owner="client") as client:
            looping = await client.enqueue("loops", task_id="long")
            while (await looping.get()).status is not TaskStatus.RUNNING:
                await asyncio.sleep(0.02)
            worker.send_signal(signal.SIGTERM)
            final = await looping.wait(timeout=DEADLINE)
            assert await asyncio.to_thread(worker.wait, DEADLINE) == 0
            history = await client.history("long")
        assert final.status is TaskStatus.STOPPED
        assert [(t.to_status.value, t.trigger) for t in history][-2:] == [
            ("stopping", "runtime:shutdown"),
            ("stopped", "runtime:stop_confirmed"),
        ]
    finally:
        _finish(worker)


def test_worker_refuses_bad_options(tmp_path: Path) -> None:
    from tests.cli.support import assert_one_line_error, invoke

    db = tmp_path / "t.db"
    base = ["worker", "--tasks", "tests.cli.cli_tasks"]
    assert "--max-parallel" in assert_one_line_error(invoke(db, *base, "--max-parallel", "0"))
    assert "--grace" in assert_one_line_error(invoke(db, *base, "--grace", "-1"))
    assert "register(controller)" in assert_one_line_error(invoke(db, "worker", "--tasks", "os"))
    assert "--owned-buckets" in assert_one_line_error(invoke(db, "--owned-buckets", "99", *base))
    assert not db.exists()
