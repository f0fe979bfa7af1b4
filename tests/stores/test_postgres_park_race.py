"""PostgreSQL: a parent's park and its child's end committing side by side still wake it.

Two transactions, held open by hand on two connections: the parent's park
(``running -> queued`` with an earliest start, unowned) and the child's end.
Whichever writes first, after both commit the parent is claimable now. Before
the child's end locked the parent's row, the park saw no fact (not committed
yet) and the child's wake saw no park (not committed yet): the parent slept
until its deadline, an hour for a child (the child kill proof found it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chongming.state.status import TaskStatus
from chongming.stores.durable import StepRecord
from chongming.testing.store_contract import make_snapshot, next_step
from tests.stores.pg_support import PgStoreFactory, admin_connection, require_postgres

pytestmark = pytest.mark.postgres

_S = TaskStatus


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


async def _running(store: Any, task_id: str) -> None:
    snapshot = make_snapshot(task_id)
    await store.create(snapshot)
    for to in (_S.QUEUED, _S.STARTING, _S.RUNNING):
        moved, transition = next_step(snapshot, to, owner="node-a")
        await store.save(moved, expect_version=snapshot.status_version, transitions=[transition])
        snapshot = moved


async def _family(store: Any) -> None:
    """A running parent waiting for its running child's end (its deadline recorded)."""
    await _running(store, "parent")
    await _running(store, "child")
    await store.link_child("parent", "child")
    epoch = await store.begin_durable_attempt("parent", "node-a", max_resumes=3)
    step = StepRecord(name="fact:child:child:deadline", occurrence=0, ok=True, value=None)
    await store.record_step("parent", epoch, step)


@pytest.mark.parametrize("first", ["park", "end"])
async def test_a_park_and_a_child_end_side_by_side_leave_the_parent_claimable(
    factory: PgStoreFactory, first: str
) -> None:
    store = factory.make()
    await store.open()
    await _family(store)
    tasks = f'"{factory.schemas[-1]}".tasks'
    park = (
        f"UPDATE {tasks} SET status = 'queued', owner = NULL,"
        " not_before = clock_timestamp() + interval '1 day' WHERE task_id = 'parent'"
    )
    end = f"UPDATE {tasks} SET status = 'succeeded' WHERE task_id = 'child'"
    async with admin_connection() as one, admin_connection() as two:
        first_sql, second_sql = (park, end) if first == "park" else (end, park)
        opened = one.transaction()
        await opened.start()
        await one.execute(first_sql)  # holds its rows' locks, not committed
        other = two.transaction()
        await other.start()
        second = asyncio.ensure_future(two.execute(second_sql))
        # The second writer waits for the first's lock on the parent's row: it
        # cannot finish before that commit (a short look, so no false failure).
        done, _ = await asyncio.wait({second}, timeout=0.3)
        assert not done, "the second writer did not wait for the first"
        await opened.commit()
        await asyncio.wait_for(second, 10)
        await other.commit()
    parent = await store.get("parent")
    assert parent is not None
    assert parent.status is _S.QUEUED
    assert parent.not_before is None, "the parent sleeps although its child's end is stored"
    assert await store.get_fact("parent", "child:child") is not None
