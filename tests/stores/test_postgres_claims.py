"""A started claim on PostgreSQL whose answer is lost: recognised by its time, never stranded."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming.errors import StoreUnavailable
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from tests.stores.pg_support import PgStoreFactory, require_postgres

pytestmark = pytest.mark.postgres

_SERVES = {"job": [None]}
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


async def _enqueue(store: Any, task_id: str, n: int) -> None:
    at = T0 + timedelta(seconds=n)
    pending = TaskSnapshot(
        task_id=task_id,
        name="job",
        label=task_id,
        status=TaskStatus.PENDING,
        status_version=0,
        attempt=0,
        max_attempts=1,
        created_at=at,
        updated_at=at,
    )
    queued, step = apply_transition(pending, TaskStatus.QUEUED, trigger="test:enqueued", at=at)
    await store.enqueue(dataclasses.replace(queued, queued_at=at), [step])


def _lose_the_answer(store: Any) -> list[int]:
    """Make the next claim statement commit, then fail as if the connection broke."""
    claims = store._queue.claims
    once = claims._once
    lost: list[int] = []

    async def committed_then_broken(what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        result = await once(what, work)
        if not lost:
            lost.append(len(result))
            raise ConnectionResetError("the answer never arrived")
        return result

    claims._once = committed_then_broken
    return lost


async def test_a_lost_answer_is_recovered_by_the_claims_time(factory: PgStoreFactory) -> None:
    store = factory.make()
    for n in range(5):
        await _enqueue(store, f"t-{n}", n)
    lost = _lose_the_answer(store)
    at = T0 + timedelta(minutes=1, microseconds=3)
    taken = await store.claim_started("w", serves=_SERVES, limit=3, at=at)
    assert lost == [3]  # the statement ran and committed; its answer was lost
    assert [c.snapshot.task_id for c in taken] == ["t-0", "t-1", "t-2"]
    for claimed in taken:
        assert claimed.snapshot.status is TaskStatus.STARTING
        assert list(claimed.history) == await store.history(claimed.snapshot.task_id)
        assert [t.to_status for t in claimed.history] == [TaskStatus.QUEUED, TaskStatus.STARTING]
    rest = await store.claim_started("w", serves=_SERVES, limit=10, at=at + timedelta(seconds=1))
    assert [c.snapshot.task_id for c in rest] == ["t-3", "t-4"]  # nothing twice


async def test_when_even_the_recovery_read_fails_the_next_claim_answers_it(
    factory: PgStoreFactory,
) -> None:
    store = factory.make()
    for n in range(4):
        await _enqueue(store, f"t-{n}", n)
    # An earlier started claim of this owner, still unanswered, must not count as ours.
    other = await store.claim_started("w", serves=_SERVES, limit=1, at=T0)
    assert [c.snapshot.task_id for c in other] == ["t-0"]
    _lose_the_answer(store)
    claims = store._queue.claims
    read = claims._read
    failures: list[str] = []

    async def unreachable(what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        if not failures:
            failures.append(what)
            raise StoreUnavailable("the server went away")
        return await read(what, work)

    claims._read = unreachable
    at = T0 + timedelta(minutes=2)
    with pytest.raises(StoreUnavailable):
        await store.claim_started("w", serves=_SERVES, limit=2, at=at)
    # t-1 and t-2 are ours in the store, started; the next claim hands them over first.
    following = await store.claim_started("w", serves=_SERVES, limit=5, at=at + timedelta(1))
    ids = [c.snapshot.task_id for c in following]
    assert ids == ["t-1", "t-2", "t-3"]
    by_id = {c.snapshot.task_id: c for c in following}
    assert by_id["t-1"].snapshot.updated_at == at
    assert by_id["t-3"].snapshot.updated_at == at + timedelta(1)
    assert await store.claim_started("w", serves=_SERVES, limit=5, at=at + timedelta(2)) == []
