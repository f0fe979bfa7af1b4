"""A started claim on PostgreSQL answers each task's whole stored history, whatever its shape.

The claim reads the last stored transition by its key and the older ones only
for a task claimed above version 1; these cases pin that the answer is still
exactly what ``history`` reads afterwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from tests.stores.pg_support import PgStoreFactory, require_postgres

pytestmark = pytest.mark.postgres

_S = TaskStatus
_SERVES = {"job": [None]}
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


def _queued(task_id: str, **step: Any) -> tuple[TaskSnapshot, Transition]:
    pending = TaskSnapshot(
        task_id=task_id,
        name="job",
        label=task_id,
        status=_S.PENDING,
        status_version=0,
        attempt=0,
        max_attempts=3,
        created_at=T0,
        updated_at=T0,
    )
    trigger = step.pop("trigger", "orchestrator:enqueued")
    queued, transition = apply_transition(pending, _S.QUEUED, trigger=trigger, at=T0, **step)
    return dataclasses.replace(queued, queued_at=T0), transition


def _step(snapshot: TaskSnapshot, to: TaskStatus, trigger: str, n: int) -> Any:
    at = T0 + timedelta(seconds=n)
    return apply_transition(snapshot, to, trigger=trigger, at=at)


async def _claim_one(store: Any, n: int) -> Any:
    at = T0 + timedelta(minutes=n)
    [claimed] = await store.claim_started("node", serves=_SERVES, limit=1, at=at)
    assert list(claimed.history) == await store.history(claimed.snapshot.task_id)
    return claimed


async def test_a_fresh_task_a_requeued_one_and_a_retried_one(factory: PgStoreFactory) -> None:
    store = factory.make()
    async with store:
        snapshot, transition = _queued("t")
        await store.enqueue(snapshot, [transition])
        claimed = await _claim_one(store, 1)
        assert [t.version for t in claimed.history] == [1, 2]
        for round_, trigger in enumerate(["runtime:parked", "runtime:retry_due", "test:requeued"]):
            current = claimed.snapshot
            running, a = _step(current, _S.RUNNING, "executor:launched", 10 * round_ + 1)
            waiting, b = _step(running, _S.RETRY_WAIT, "runtime:sleeping", 10 * round_ + 2)
            queued, c = _step(waiting, _S.QUEUED, trigger, 10 * round_ + 3)
            queued = dataclasses.replace(queued, owner=None)
            await store.save(queued, expect_version=current.status_version, transitions=[a, b, c])
            claimed = await _claim_one(store, round_ + 2)
            assert claimed.history[-1].version == claimed.snapshot.status_version
        assert [t.attempt for t in claimed.history if t.to_status is _S.STARTING] == [1, 1, 2, 3]


async def test_an_enqueue_with_an_unusual_first_history(factory: PgStoreFactory) -> None:
    store = factory.make()
    async with store:
        snapshot, transition = _queued("other", trigger="test:imported", actor="user:ann")
        await store.enqueue(snapshot, [transition])
        bare, _ = _queued("bare")
        await store.enqueue(bare, [])  # no first transition at all
        first = await _claim_one(store, 1)
        second = await _claim_one(store, 2)
        by_id = {c.snapshot.task_id: c for c in (first, second)}
        assert by_id["other"].history[0] == transition
        assert [t.version for t in by_id["bare"].history] == [2]


async def test_a_created_task_given_back_to_the_queue_at_its_version(
    factory: PgStoreFactory,
) -> None:
    """A row ``create`` wrote (not an enqueue), made claimable without a new version."""
    store = factory.make()
    async with store:
        snapshot, transition = _queued("made", trigger="test:made")
        owned = dataclasses.replace(snapshot, owner="elsewhere")
        await store.create(owned, [transition])
        await store.save(snapshot, expect_version=1)  # owner cleared, same version
        claimed = await _claim_one(store, 1)
        assert claimed.history[0] == transition
        assert claimed.snapshot.attempt == 1
