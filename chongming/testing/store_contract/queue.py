"""The work queue: enqueue once per key (input compared), claim atomically and best first."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta

from chongming.errors import DuplicateTaskId, IdempotencyConflict, PayloadError, VersionConflict
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.testing.store_contract._support import (
    HOSTILE_STRINGS,
    T0,
    ContractBase,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["QueueContract"]

_S = TaskStatus
_SERVES = {"extract": [None]}


def _queued(task_id: str, **fields: object) -> tuple[TaskSnapshot, Transition]:
    """A task as enqueue writes it: queued, nobody's, with its first transition."""
    pending = make_snapshot(task_id, **fields)
    queued, transition = next_step(pending, _S.QUEUED, trigger="orchestrator:enqueued")
    return dataclasses.replace(queued, queued_at=queued.updated_at), transition


class QueueContract(ContractBase):
    async def _enqueue(self, store: TaskStore, task_id: str, **fields: object) -> TaskSnapshot:
        snapshot, transition = _queued(task_id, **fields)
        result = await store.enqueue(snapshot, [transition])
        assert result.created
        return result.snapshot

    # -- enqueue ---------------------------------------------------------------------

    async def test_enqueue_stores_the_recipe_and_its_first_transition(self) -> None:
        async with self._store() as store:
            snapshot, transition = _queued(
                "q-1",
                args=("2026-10-02", 7),
                kwargs={"tenant": HOSTILE_STRINGS[8]},
                version=3,
                not_before=T0 + timedelta(hours=1),
                idempotency_key="order-42",
                priority=5,
            )
            result = await store.enqueue(snapshot, [transition])
            assert result.created
            assert result.snapshot == snapshot
            assert await store.get("q-1") == snapshot
            assert await store.history("q-1") == [transition]
            assert (await store.get("q-1")).version == 3  # type: ignore[union-attr]

    async def test_the_earliest_and_latest_not_before_come_back_aware(self) -> None:
        """Aware ``datetime.min`` / ``max`` round-trip as they went in (PostgreSQL: ±infinity)."""
        async with self._store() as store:
            for task_id, when in (("min", datetime.min), ("max", datetime.max)):
                aware = when.replace(tzinfo=T0.tzinfo)
                snapshot, transition = _queued(task_id, not_before=aware)
                result = await store.enqueue(snapshot, [transition])
                stored = await store.get(task_id)
                assert stored is not None
                for found in (result.snapshot.not_before, stored.not_before):
                    assert found == aware
                    assert found is not None
                    assert found.utcoffset() == timedelta(0)
            taken = await store.claim("node-a", serves={"extract": [None]}, limit=10)
            assert [t.task_id for t in taken] == ["min"]  # max: never due

    async def test_the_same_key_and_input_returns_the_first_task(self) -> None:
        async with self._store() as store:
            first = await self._enqueue(store, "q-1", idempotency_key="k", kwargs={"a": 1})
            again, transition = _queued("q-2", idempotency_key="k", kwargs={"a": 1})
            result = await store.enqueue(again, [transition])
            assert not result.created
            assert result.snapshot == first
            assert await store.get("q-2") is None  # nothing of the second call was written
            assert await store.history("q-2") == []

    async def test_the_same_key_with_other_input_is_refused_on_every_field(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "q-1", idempotency_key="k", args=(1,), version=1)
            for changed in (
                {"args": (2,), "version": 1},
                {"args": (1,), "version": 2},
                {"args": (1,), "version": 1, "name": "load"},
                {"args": (1,), "version": 1, "kwargs": {"extra": True}},
            ):
                twin, transition = _queued("q-1", idempotency_key="k", **changed)
                error = await _raises(IdempotencyConflict, store.enqueue(twin, [transition]))
                assert error.key == "k"
                assert error.task_id == "q-1"
            assert [t.task_id for t in await store.query(TaskQuery())] == ["q-1"]

    async def test_a_duplicate_id_without_a_key_is_refused_and_a_key_is_not_taken(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "q-1")
            twin, transition = _queued("q-1", idempotency_key="fresh")
            await _raises(DuplicateTaskId, store.enqueue(twin, [transition]))
            # the refused call left no key behind: the key is free for a new task
            other = await self._enqueue(store, "q-2", idempotency_key="fresh")
            assert other.task_id == "q-2"

    async def test_racing_the_same_key_gives_one_task(self) -> None:
        async with self._store() as store:
            attempts = [_queued(f"q-{n}", idempotency_key="race", args=(1,)) for n in range(8)]
            results = await asyncio.gather(
                *(store.enqueue(snapshot, [transition]) for snapshot, transition in attempts)
            )
            assert sum(result.created for result in results) == 1
            winner = next(result.snapshot for result in results if result.created)
            assert {result.snapshot.task_id for result in results} == {winner.task_id}
            assert len(await store.query(TaskQuery())) == 1

    async def test_bad_keys_and_versions_are_refused_and_nothing_is_written(self) -> None:
        async with self._store() as store:
            for fields in (
                {"idempotency_key": "nul\x00key"},
                {"idempotency_key": "x" * 10_000},
                {"idempotency_key": ""},
                {"idempotency_key": "line\nbreak"},
                {"version": -1},
                {"version": 2**31},
            ):
                snapshot, transition = _queued("bad", **fields)
                await _raises(PayloadError, store.enqueue(snapshot, [transition]))
                assert await store.get("bad") is None

    async def test_histories_answers_like_history_for_each_id(self) -> None:
        async with self._store() as store:
            await self._trajectory(store, "done")
            await self._enqueue(store, "q-1")
            found = await store.histories(["done", "q-1", "never"])
            assert set(found) == {"done", "q-1", "never"}
            for task_id in ("done", "q-1", "never"):
                assert found[task_id] == await store.history(task_id)
            assert len(found["done"]) == 4
            assert await store.histories([]) == {}

    # -- claim -----------------------------------------------------------------------

    async def test_claim_takes_higher_priority_first_then_fifo(self) -> None:
        async with self._store() as store:
            order = [("low-1", 0), ("high-1", 9), ("low-2", 0), ("mid", 5), ("high-2", 9)]
            for index, (task_id, priority) in enumerate(order):
                at = T0 + timedelta(seconds=index)
                await self._enqueue(store, task_id, priority=priority, created_at=at, updated_at=at)
            first = await store.claim("node-a", serves=_SERVES, limit=2)
            assert [t.task_id for t in first] == ["high-1", "high-2"]
            assert all(t.owner == "node-a" and t.status is _S.QUEUED for t in first)
            rest = await store.claim("node-b", serves=_SERVES, limit=10)
            assert [t.task_id for t in rest] == ["mid", "low-1", "low-2"]
            assert await store.claim("node-c", serves=_SERVES, limit=10) == []
            stored = await store.get("high-1")
            assert stored is not None
            assert stored.owner == "node-a"
            assert stored.status_version == first[0].status_version  # no transition

    async def test_claim_honours_names_versions_buckets_and_not_before(self) -> None:
        async with self._store() as store:
            # Past and future for any store clock at or after T0 (fake or real).
            soon = T0 - timedelta(days=1)
            later = datetime.now(T0.tzinfo) + timedelta(days=3650)
            await self._enqueue(store, "v1", version=1)
            await self._enqueue(store, "v2", version=2)
            await self._enqueue(store, "any")  # unversioned: any served version
            await self._enqueue(store, "other", name="load")
            await self._enqueue(store, "b7", bucket=7)
            await self._enqueue(store, "b8", bucket=8)
            await self._enqueue(store, "due", not_before=soon)
            await self._enqueue(store, "future", not_before=later)
            taken = await store.claim(
                "node-a", serves={"extract": [2]}, buckets=frozenset({7}), limit=100
            )
            assert sorted(t.task_id for t in taken) == ["any", "b7", "due", "v2"]
            taken = await store.claim("node-b", serves={"extract": [1], "load": [None]}, limit=100)
            assert sorted(t.task_id for t in taken) == ["b8", "other", "v1"]
            assert await store.claim("node-c", serves={"extract": [1, 2, None]}, limit=100) == []
            future = await store.get("future")
            assert future is not None
            assert future.owner is None

    async def test_claim_leaves_tasks_carrying_an_excluded_tag(self) -> None:
        async with self._store() as store:
            odd = HOSTILE_STRINGS[1]  # quotes and SQL in a tag: data, never syntax
            await self._enqueue(store, "plain")
            await self._enqueue(store, "gpu", tags=frozenset({"gpu"}))
            await self._enqueue(store, "both", tags=frozenset({"gpu", "io"}))
            await self._enqueue(store, "io", tags=frozenset({"io"}))
            await self._enqueue(store, "odd", tags=frozenset({odd, "io"}))
            taken = await store.claim(
                "node-a", serves=_SERVES, limit=10, exclude_tags=["gpu", odd, "absent"]
            )
            assert sorted(t.task_id for t in taken) == ["io", "plain"]
            # any one excluded tag is enough; nothing left here is free of "io" or "gpu"
            none = await store.claim("node-b", serves=_SERVES, limit=10, exclude_tags={"io", "gpu"})
            assert none == []
            rest = await store.claim("node-b", serves=_SERVES, limit=10, exclude_tags=())
            assert sorted(t.task_id for t in rest) == ["both", "gpu", "odd"]

    async def test_claimers_racing_never_take_a_task_twice(self) -> None:
        async with self._store() as store:
            for n in range(40):
                await self._enqueue(store, f"t-{n:02d}")
            batches = await asyncio.gather(
                *(store.claim(f"node-{n}", serves=_SERVES, limit=7) for n in range(8))
            )
            taken = [t.task_id for batch in batches for t in batch]
            assert sorted(taken) == [f"t-{n:02d}" for n in range(40)]
            for batch, n in zip(batches, range(8), strict=True):
                assert all(t.owner == f"node-{n}" for t in batch)

    async def test_only_queued_unowned_tasks_are_claimed(self) -> None:
        async with self._store() as store:
            await self._trajectory(store, "done")  # succeeded
            await store.create(make_snapshot("pending"))
            mine = await self._enqueue(store, "held", owner="node-z")
            assert mine.owner == "node-z"
            assert await store.claim("node-a", serves=_SERVES, limit=10) == []

    async def test_claim_refuses_bad_arguments(self) -> None:
        async with self._store() as store:
            for owner, serves, buckets, limit in (
                ("", _SERVES, None, 1),
                ("n\x00", _SERVES, None, 1),
                ("node", _SERVES, None, 0),
                ("node", {"extract": ["1"]}, None, 1),
                ("node", _SERVES, ["7"], 1),
            ):
                await _raises(
                    PayloadError,
                    store.claim(owner, serves=serves, buckets=buckets, limit=limit),  # type: ignore[arg-type]
                )
            for exclude in ("gpu", [""], [7], ["nul\x00"], None):
                await _raises(
                    PayloadError,
                    store.claim("node", serves=_SERVES, exclude_tags=exclude),  # type: ignore[arg-type]
                )

    # -- claim and start in one step ---------------------------------------------------

    async def test_claim_started_writes_the_start_with_the_claim(self) -> None:
        async with self._store() as store:
            first = await self._enqueue(store, "q-1", priority=5)
            for n, (task_id, tags) in enumerate([("q-2", ()), ("q-3", ()), ("gpu", ("gpu",))]):
                at = T0 + timedelta(seconds=n + 1)
                tagged = frozenset(tags)
                await self._enqueue(store, task_id, tags=tagged, created_at=at, updated_at=at)
            at = T0 + timedelta(minutes=5, microseconds=7)
            taken = await store.claim_started(
                "node-a", serves=_SERVES, limit=2, exclude_tags=["gpu"], at=at
            )
            assert [c.snapshot.task_id for c in taken] == ["q-1", "q-2"]
            for claimed in taken:
                started = claimed.snapshot
                assert (started.status, started.owner) == (_S.STARTING, "node-a")
                assert (started.status_version, started.attempt) == (2, 1)
                assert started.updated_at == at
                assert await store.get(started.task_id) == started
                history = await store.history(started.task_id)
                assert list(claimed.history) == history
                assert history[-1] == Transition(
                    task_id=started.task_id,
                    version=2,
                    from_status=_S.QUEUED,
                    to_status=_S.STARTING,
                    at=at,
                    trigger="scheduler:dispatch",
                    actor="system",
                    reason=None,
                    attempt=1,
                )
            assert taken[0].history[0] == (await store.history(first.task_id))[0]
            # fenced by the new version: the claimer moves on from it, nobody from the old one
            running, step = next_step(taken[0].snapshot, _S.RUNNING, trigger="executor:launched")
            stale, _ = next_step(first, _S.CANCELLED, trigger="user:stop")
            await _raises(VersionConflict, store.save(stale, expect_version=1))
            await store.save(running, expect_version=2, transitions=[step])
            assert not await store.release_claim("q-2", "node-a", 1)  # it started: not given back
            rest = await store.claim("node-b", serves=_SERVES, limit=10)
            assert [t.task_id for t in rest] == ["q-3", "gpu"]

    async def test_a_start_after_a_park_or_a_resume_continues_its_attempt(self) -> None:
        """``attempt`` counts retries only: a park or a resume continues the attempt."""
        async with self._store() as store:
            await self._enqueue(store, "p-1")
            at = T0 + timedelta(minutes=1)
            [claimed] = await store.claim_started("node-a", serves=_SERVES, limit=1, at=at)
            snapshot = claimed.snapshot
            assert snapshot.attempt == 1
            for queued_by in ("runtime:parked", "reconcile:resumed", "runtime:retry_due"):
                running, a = next_step(snapshot, _S.RUNNING, trigger="executor:launched")
                waiting, b = next_step(running, _S.RETRY_WAIT, trigger="runtime:sleeping")
                queued, c = next_step(waiting, _S.QUEUED, trigger=queued_by, owner=None)
                await store.save(
                    queued, expect_version=snapshot.status_version, transitions=[a, b, c]
                )
                at += timedelta(minutes=1)
                [claimed] = await store.claim_started("node-b", serves=_SERVES, limit=1, at=at)
                snapshot = claimed.snapshot
                assert claimed.history[-1].attempt == snapshot.attempt
                assert await store.get("p-1") == snapshot
            # one attempt, continued by a park and a resume; then a retry began the second
            assert snapshot.attempt == 2
            starts = [t.attempt for t in await store.history("p-1") if t.to_status is _S.STARTING]
            assert starts == [1, 1, 1, 2]

    async def test_claimers_starting_what_they_race_for_never_take_a_task_twice(self) -> None:
        async with self._store() as store:
            for n in range(30):
                await self._enqueue(store, f"t-{n:02d}")
            at = T0 + timedelta(hours=1)
            batches = await asyncio.gather(
                *(
                    store.claim_started(f"node-{n}", serves=_SERVES, limit=4, at=at)
                    for n in range(8)
                )
            )
            taken = [c.snapshot.task_id for batch in batches for c in batch]
            assert sorted(taken) == [f"t-{n:02d}" for n in range(30)]
            for batch, n in zip(batches, range(8), strict=True):
                for claimed in batch:
                    assert claimed.snapshot.owner == f"node-{n}"
                    assert [t.version for t in claimed.history] == [1, 2]
                    assert len(await store.history(claimed.snapshot.task_id)) == 2
            assert await store.claim_started("late", serves=_SERVES, limit=5, at=at) == []

    async def test_claim_started_refuses_bad_arguments_and_writes_nothing(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "q-1")
            naive = datetime(2026, 10, 2, 9, 0)
            for at in (naive, "2026-10-02", None):
                await _raises(
                    PayloadError,
                    store.claim_started("node", serves=_SERVES, at=at),  # type: ignore[arg-type]
                )
            await _raises(PayloadError, store.claim_started("", serves=_SERVES, at=T0))
            await _raises(
                PayloadError,
                store.claim_started("node", serves=_SERVES, exclude_tags="gpu", at=T0),
            )
            stored = await store.get("q-1")
            assert stored is not None
            assert (stored.status, stored.owner, stored.status_version) == (_S.QUEUED, None, 1)

    async def test_release_claim_gives_a_claimed_task_back_only_if_unmoved(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "q-1")
            await self._enqueue(store, "q-2")
            first, second = await store.claim("node-a", serves=_SERVES, limit=2)
            assert not await store.release_claim("q-1", "node-b", first.status_version)
            assert not await store.release_claim("q-1", "node-a", first.status_version + 1)
            assert await store.release_claim("q-1", "node-a", first.status_version)
            assert not await store.release_claim("q-1", "node-a", first.status_version)
            released = await store.get("q-1")
            assert released is not None
            assert (released.owner, released.status) == (None, _S.QUEUED)
            assert released.status_version == first.status_version
            assert len(await store.history("q-1")) == 1  # no transition: only the owner changed
            # a moved task is not released: it started on its node
            moved, transition = next_step(second, _S.STARTING, trigger="scheduler:dispatch")
            await store.save(moved, expect_version=second.status_version, transitions=[transition])
            assert not await store.release_claim("q-2", "node-a", second.status_version)
            assert not await store.release_claim("q-2", "node-a", moved.status_version)
            again = await store.claim("node-c", serves=_SERVES, limit=5)
            assert [t.task_id for t in again] == ["q-1"]
