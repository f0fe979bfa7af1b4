"""A PostgreSQL server restarted mid-run (``pg_ctl -m immediate restart``).

Runs against a throwaway cluster (``tests/pg_cluster.py``: ``initdb`` into a
temp dir as the ``postgres`` OS user, on a free loopback port), never the
shared server.
Pass marks from docs/reliability.md: no acknowledged transition lost; writes
resume within 10 s of the server accepting connections again.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from chongming.errors import StoreUnavailable, VersionConflict
from chongming.state.audit import audit_history
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.testing.store_contract import make_snapshot, next_step
from tests.pg_cluster import PgCluster, pg_cluster
from tests.stores.pg_support import reread

__all__ = ["pg_cluster"]  # the fixture, imported for pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

_S = TaskStatus
_CYCLE = {_S.RUNNING: _S.PAUSING, _S.PAUSING: _S.RUNNING}
_START = {_S.PENDING: _S.QUEUED, _S.QUEUED: _S.STARTING, _S.STARTING: _S.RUNNING}


@pytest.fixture
def cluster(pg_cluster: PgCluster) -> PgCluster:
    return pg_cluster


async def test_server_restart_loses_no_acknowledged_transition(cluster: PgCluster) -> None:
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
