"""A PostgreSQL prune batch never sits in a lock queue: past its lock timeout it fails busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from chongming.errors import StoreBusy
from chongming.state.query import TaskQuery
from chongming.state.status import TaskStatus
from chongming.stores.postgres import PostgresTaskStore
from chongming.stores.retention import PruneSelection
from chongming.testing.store_contract import make_snapshot, next_step
from tests.stores.pg_support import PgStoreFactory, admin_connection, require_postgres

pytestmark = pytest.mark.postgres

_S = TaskStatus


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


async def _succeeded(store: PostgresTaskStore, task_id: str) -> None:
    snapshot = make_snapshot(task_id)
    await store.create(snapshot)
    for to in (_S.QUEUED, _S.STARTING, _S.RUNNING, _S.SUCCEEDED):
        moved, transition = next_step(snapshot, to, owner="node-a")
        await store.save(moved, expect_version=snapshot.status_version, transitions=[transition])
        snapshot = moved


async def test_a_batch_that_meets_a_held_lock_fails_busy_and_deletes_nothing(
    factory: PgStoreFactory,
) -> None:
    store: PostgresTaskStore = factory.make()
    await store.open()
    for task_id in ("old-1", "old-2"):
        await _succeeded(store, task_id)
    everything = PruneSelection(finished_before=datetime.now(UTC) + timedelta(days=1))
    schema = factory.schemas[-1]
    async with admin_connection() as holder:
        # Another transaction holds a history row of old-1: the pick of the task row
        # does not see it (it skips only locked task rows), the delete of the history does.
        transaction = holder.transaction()
        await transaction.start()
        try:
            await holder.execute(
                f'SELECT 1 FROM "{schema}".transitions WHERE task_id = $1 FOR UPDATE', "old-1"
            )
            with pytest.raises(StoreBusy):
                # Bounded by the test, not the prune: without a lock timeout it waits
                # here for as long as the holder holds.
                await asyncio.wait_for(store.prune_tasks(everything, limit=10), timeout=30)
        finally:
            await transaction.rollback()
    assert {t.task_id for t in await store.query(TaskQuery())} == {"old-1", "old-2"}
    assert await store.prune_tasks(everything, limit=10) == 2  # once released, it goes
    assert await store.query(TaskQuery()) == []
