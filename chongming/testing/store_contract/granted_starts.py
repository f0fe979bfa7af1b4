"""Starting what a plain claim took (``start_claimed``): a rate-limited claimer's second step.

Part of the queue: mix :class:`StartClaimedContract` into a contract subclass
of a backend that implements ``start_claimed``, and :class:`GrantedClaimContract`
(which includes it) into one that has rate limits too (``claim_granted``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from chongming.errors import PayloadError, UnknownRateLimit
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.stores.granted import GrantAsk
from chongming.stores.rates import RateLimit
from chongming.testing.store_contract._support import T0, _raises, next_step
from chongming.testing.store_contract.queue import QueueContract

__all__ = ["GrantedClaimContract", "StartClaimedContract"]

_S = TaskStatus
_SERVES = {"extract": [None]}


class StartClaimedContract(QueueContract):
    async def test_start_claimed_writes_what_a_started_claim_writes(self) -> None:
        async with self._store() as store:
            for n in range(3):
                at = T0 + timedelta(seconds=n)
                await self._enqueue(store, f"q-{n}", created_at=at, updated_at=at)
            claimed = await store.claim("node-a", serves=_SERVES, limit=3)
            at = T0 + timedelta(minutes=5, microseconds=7)
            # the claimer starts two of the three, in its own order
            started = await store.start_claimed("node-a", [claimed[2], claimed[0]], at=at)
            assert [c.snapshot.task_id for c in started] == ["q-2", "q-0"]
            for task in started:
                snapshot = task.snapshot
                assert (snapshot.status, snapshot.owner) == (_S.STARTING, "node-a")
                assert (snapshot.status_version, snapshot.attempt) == (2, 1)
                assert snapshot.updated_at == at
                assert await store.get(snapshot.task_id) == snapshot
                history = await store.history(snapshot.task_id)
                assert list(task.history) == history
                assert history[-1] == Transition(
                    task_id=snapshot.task_id,
                    version=2,
                    from_status=_S.QUEUED,
                    to_status=_S.STARTING,
                    at=at,
                    trigger="scheduler:dispatch",
                    actor="system",
                    reason=None,
                    attempt=1,
                )
            left = await store.get("q-1")
            assert left is not None
            assert (left.status, left.owner, left.status_version) == (_S.QUEUED, "node-a", 1)
            assert await store.release_claim("q-1", "node-a", 1)  # the one not started goes back
            assert not await store.release_claim("q-0", "node-a", 1)  # a started one does not

    async def test_start_claimed_starts_only_what_is_still_held_at_its_claimed_version(
        self,
    ) -> None:
        async with self._store() as store:
            for n in range(4):
                await self._enqueue(store, f"q-{n}", created_at=T0 + timedelta(seconds=n))
            mine = await store.claim("node-a", serves=_SERVES, limit=3)
            theirs = await store.claim("node-b", serves=_SERVES, limit=1)
            assert [t.task_id for t in theirs] == ["q-3"]
            # q-0 is stopped meanwhile; q-1 is given back and claimed again by node-b
            stopped, step = next_step(mine[0], _S.CANCELLED, trigger="user:stop")
            await store.save(stopped, expect_version=1, transitions=[step])
            assert await store.release_claim("q-1", "node-a", 1)
            assert [t.task_id for t in await store.claim("node-b", serves=_SERVES)] == ["q-1"]
            at = T0 + timedelta(minutes=1)
            # node-a may start only q-2; node-a cannot start node-b's q-3 either
            started = await store.start_claimed("node-a", [*mine, theirs[0]], at=at)
            assert [c.snapshot.task_id for c in started] == ["q-2"]
            for task_id, status, owner in (
                ("q-0", _S.CANCELLED, "node-a"),
                ("q-1", _S.QUEUED, "node-b"),
                ("q-3", _S.QUEUED, "node-b"),
            ):
                stored = await store.get(task_id)
                assert stored is not None
                assert (stored.status, stored.owner) == (status, owner)
            # asked again, nothing starts twice
            assert await store.start_claimed("node-a", mine, at=at + timedelta(seconds=1)) == []
            assert len(await store.history("q-2")) == 2

    async def test_racing_starts_of_one_claim_start_each_task_once(self) -> None:
        async with self._store() as store:
            for n in range(6):
                await self._enqueue(store, f"q-{n}")
            claimed = await store.claim("node-a", serves=_SERVES, limit=6)
            at = T0 + timedelta(hours=1)
            answers = await asyncio.gather(
                *(
                    store.start_claimed("node-a", claimed, at=at + timedelta(seconds=n))
                    for n in range(4)
                )
            )
            started = sorted(c.snapshot.task_id for answer in answers for c in answer)
            assert started == [f"q-{n}" for n in range(6)]
            for n in range(6):
                assert [t.version for t in await store.history(f"q-{n}")] == [1, 2]

    async def test_start_claimed_refuses_bad_arguments_and_writes_nothing(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "q-1")
            [claimed] = await store.claim("node-a", serves=_SERVES)
            for owner, tasks, at in (
                ("", [claimed], T0),
                ("n\x00", [claimed], T0),
                ("node-a", "q-1", T0),
                ("node-a", ["q-1"], T0),
                ("node-a", [claimed, claimed], T0),
                ("node-a", [claimed], "2026-10-02"),
                ("node-a", [claimed], T0.replace(tzinfo=None)),
            ):
                await _raises(
                    PayloadError,
                    store.start_claimed(owner, tasks, at=at),  # type: ignore[arg-type]
                )
            stored = await store.get("q-1")
            assert stored is not None
            assert (stored.status, stored.owner, stored.status_version) == (_S.QUEUED, "node-a", 1)
            assert await store.start_claimed("node-a", [], at=T0) == []


def _tags_of_registered(name: str, version: int | None, tags: frozenset[str]) -> frozenset[str]:
    """A claimer that registered ``call-api`` with the tag ``api`` (its rows carry none)."""
    return tags | {"api"} if name == "call-api" else tags


class GrantedClaimContract(StartClaimedContract):
    """``claim_granted``: a store with the queue, rate limits and ``start_claimed``."""

    async def test_a_granted_claim_starts_the_granted_and_leaves_the_rest_untouched(
        self,
    ) -> None:
        async with self._store() as store:
            await store.declare_rate_limit(
                "api", RateLimit(rate=2, per=timedelta(minutes=1), burst=2)
            )
            serves = {"extract": [None], "call-api": [None]}
            for n in range(3):  # tagged by their rows
                at = T0 + timedelta(seconds=n)
                await self._enqueue(
                    store, f"tagged-{n}", tags=frozenset({"api"}), created_at=at, updated_at=at
                )
            at = T0 + timedelta(seconds=10)  # tagged by their registration
            await self._enqueue(store, "registered", name="call-api", created_at=at, updated_at=at)
            at = T0 + timedelta(seconds=20)
            await self._enqueue(store, "plain", created_at=at, updated_at=at)
            start = T0 + timedelta(hours=1)
            answer = await store.claim_granted(
                "node-a",
                serves=serves,
                limit=10,
                at=start,
                grants=GrantAsk(limited=frozenset({"api"}), tags_of=_tags_of_registered),
            )
            assert sorted(c.snapshot.task_id for c in answer.started) == [
                "plain",
                "tagged-0",
                "tagged-1",
            ]
            assert answer.refused == 2
            assert answer.grants["api"].granted == 2  # rate 2/min: the burst of 2, no more
            assert answer.grants["api"].retry_after > 0
            for task in answer.started:
                assert (task.snapshot.status, task.snapshot.owner) == (_S.STARTING, "node-a")
                assert list(task.history) == await store.history(task.snapshot.task_id)
                assert task.history[-1].at == start
            for task_id in ("tagged-2", "registered"):  # refused: queued, nobody's, unmoved
                stored = await store.get(task_id)
                assert stored is not None
                assert (stored.status, stored.owner, stored.status_version) == (_S.QUEUED, None, 1)
            # the grants are spent: the next claim starts nothing tagged
            again = await store.claim_granted(
                "node-b",
                serves=serves,
                limit=10,
                at=start,
                grants=GrantAsk(limited=frozenset({"api"}), tags_of=_tags_of_registered),
            )
            assert again.started == []
            assert again.grants["api"].granted == 0
            assert again.refused == 2

    async def test_a_granted_claim_of_an_unknown_limit_starts_nothing(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "tagged", tags=frozenset({"api"}))
            await self._enqueue(store, "plain")
            with pytest.raises(UnknownRateLimit):
                await store.claim_granted(
                    "node-a",
                    serves=_SERVES,
                    limit=5,
                    at=T0,
                    grants=GrantAsk(limited=frozenset({"api"}), tags_of=_tags_of_registered),
                )
            for task_id in ("tagged", "plain"):
                stored = await store.get(task_id)
                assert stored is not None
                assert (stored.status, stored.owner, stored.status_version) == (_S.QUEUED, None, 1)
            for bad in ("api", GrantAsk(limited={"api"}, tags_of=_tags_of_registered)):  # type: ignore[arg-type]
                await _raises(
                    PayloadError,
                    store.claim_granted(
                        "node-a",
                        serves=_SERVES,
                        at=T0,
                        grants=bad,  # type: ignore[arg-type]
                    ),
                )
            stored = await store.get("plain")
            assert stored is not None
            assert stored.owner is None

    async def test_a_granted_claim_takes_a_pool_and_aging_like_a_claim(self) -> None:
        async with self._store() as store:
            await store.declare_rate_limit("api", RateLimit(rate=100, per=timedelta(seconds=1)))
            await self._enqueue(store, "pay", tags=frozenset({"payments", "api"}))
            await self._enqueue(store, "mail", tags=frozenset({"mail"}))
            await self._enqueue(store, "slow", tags=frozenset({"payments", "slow"}), priority=-5)
            ask = GrantAsk(limited=frozenset({"api"}), tags_of=_tags_of_registered)
            pool = await store.claim_granted(
                "pool",
                serves=_SERVES,
                limit=5,
                tags=["payments"],
                exclude_tags=["slow"],
                at=T0,
                grants=ask,
            )
            assert [c.snapshot.task_id for c in pool.started] == ["pay"]
            assert pool.grants["api"].granted == 1
            aged = await store.claim_granted(
                "aged", serves=_SERVES, limit=5, age_step=60.0, at=T0, grants=ask
            )
            assert [c.snapshot.task_id for c in aged.started] == ["mail", "slow"]
            assert aged.grants == {}  # nothing it took carries the limited tag
