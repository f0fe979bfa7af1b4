"""The store goes away mid-run: tasks keep running, no transition is lost.

SQLite: another connection holds the write lock past the busy timeout.
PostgreSQL: a throwaway cluster is stopped with ``pg_ctl -m immediate`` and
started again. In both, tasks finish while the store refuses writes; once it
answers, every task's history in the store is complete and contiguous and
equals what the controller recorded.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

from chongming import Controller, SqliteTaskStore, TaskRun, TaskStatus
from chongming.state import audit_history
from chongming.stores.base import TaskStore
from tests.pg_cluster import PgCluster, pg_cluster
from tests.support import wait_for

__all__ = ["pg_cluster"]  # the throwaway-cluster fixture, used below

S = TaskStatus


async def run_through_an_outage(
    store: TaskStore, start_outage: Any, end_outage: Any, tasks: int = 5
) -> None:
    finish = asyncio.Event()

    async def job(ctx: Any) -> str:
        while not finish.is_set():
            await ctx.checkpoint()
            ctx.progress(1)
            await asyncio.sleep(0.01)
        return "done"

    async with Controller(store=store, owner="outage", max_parallel=tasks) as controller:
        controller.register("job", job)
        runs: list[TaskRun] = [await controller.submit("job") for _ in range(tasks)]
        await wait_for(lambda: all(run.status is S.RUNNING for run in runs))
        await start_outage()
        finish.set()  # every task ends while the store refuses writes
        await wait_for(lambda: all(run.done for run in runs), timeout=10)
        assert all(run.status is S.SUCCEEDED for run in runs)
        await wait_for(lambda: controller.persist_failures.failed_writes > 0, timeout=10)
        assert controller.persist_failures.pending_transitions > 0
        await end_outage()
        outcomes = await controller.wait_all(30)
        assert [o.status for o in outcomes] == [S.SUCCEEDED] * tasks
        await wait_for(lambda: controller.persist_failures.pending_transitions == 0, timeout=30)
        failures = controller.persist_failures
        assert failures.failing_since is None
        assert failures.let_go == ()
        for run in runs:
            stored = await store.get(run.task_id)
            assert stored is not None
            history = await store.history(run.task_id)
            assert history == list(run.transitions)  # nothing lost, nothing extra
            assert audit_history(stored, history) == []
            assert stored.status is S.SUCCEEDED


async def test_sqlite_locked_past_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = SqliteTaskStore(path, busy_timeout=0.2)
    locked = threading.Event()
    release = threading.Event()

    def hold_the_lock() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            locked.set()
            release.wait(30)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    holder = threading.Thread(target=hold_the_lock)

    async def start() -> None:
        holder.start()
        assert await asyncio.to_thread(locked.wait, 10)

    async def end() -> None:
        release.set()
        await asyncio.to_thread(holder.join, 10)

    try:
        async with store:
            await run_through_an_outage(store, start, end)
    finally:
        release.set()
        if holder.is_alive():
            holder.join(10)


async def test_postgres_stopped_and_started_again(pg_cluster: PgCluster) -> None:
    cluster = pg_cluster
    from chongming.stores.postgres import PostgresTaskStore

    store = PostgresTaskStore(cluster.dsn, schema="outage", min_size=1, max_size=4)

    async def start() -> None:
        await asyncio.to_thread(cluster.pg_ctl, "stop", "-m", "immediate")

    async def end() -> None:
        await asyncio.to_thread(cluster.pg_ctl, "start")

    async with store:
        await run_through_an_outage(store, start, end)
