"""Worker pools: a claim restricted to tasks carrying one of a pool's tags.

Part of the queue: mix :class:`PoolClaimContract` into a contract subclass
of a backend whose ``claim`` and ``claim_started`` take ``tags=``.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from chongming.errors import PayloadError
from chongming.stores.base import TaskStore
from chongming.testing.store_contract._support import HOSTILE_STRINGS, T0, _raises
from chongming.testing.store_contract.queue import QueueContract, _queued

__all__ = ["PoolClaimContract"]

_SERVES = {"extract": [None]}


class PoolClaimContract(QueueContract):
    async def _queued_at(
        self, store: TaskStore, task_id: str, at: datetime, **fields: object
    ) -> None:
        snapshot, transition = _queued(task_id, **fields)
        moved = dataclasses.replace(snapshot, queued_at=at)
        assert (await store.enqueue(moved, [transition])).created

    async def test_a_pool_claims_only_tasks_carrying_one_of_its_tags(self) -> None:
        async with self._store() as store:
            odd = HOSTILE_STRINGS[1]  # quotes and SQL in a tag: data, never syntax
            await self._enqueue(store, "plain")
            await self._enqueue(store, "pay", tags=frozenset({"payments"}))
            await self._enqueue(store, "pay-slow", tags=frozenset({"payments", "slow"}))
            await self._enqueue(store, "odd", tags=frozenset({odd}))
            await self._enqueue(store, "mail", tags=frozenset({"mail"}))
            taken = await store.claim(
                "pool", serves=_SERVES, limit=10, tags=["payments", odd], exclude_tags=["slow"]
            )
            assert sorted(t.task_id for t in taken) == ["odd", "pay"]
            started = await store.claim_started(
                "pool-2", serves=_SERVES, limit=10, tags={"payments", "mail"}, at=T0
            )
            assert sorted(t.snapshot.task_id for t in started) == ["mail", "pay-slow"]
            rest = await store.claim("rest", serves=_SERVES, limit=10)
            assert [t.task_id for t in rest] == ["plain"]  # what no pool took, anyone may

    async def test_a_pool_claims_in_priority_then_queue_order(self) -> None:
        async with self._store() as store:
            for n, priority in enumerate((0, 5, 0, 5)):
                await self._enqueue(
                    store, f"t-{n}", priority=priority, tags=frozenset({"payments"})
                )
            taken = await store.claim("pool", serves=_SERVES, limit=3, tags=["payments"])
            assert [t.task_id for t in taken] == ["t-1", "t-3", "t-0"]

    async def test_an_empty_or_bad_pool_is_refused_and_claims_nothing(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "pay", tags=frozenset({"payments"}))
            for tags in ([], (), "payments", [""], [7], ["a\x00b"]):
                await _raises(
                    PayloadError,
                    store.claim("pool", serves=_SERVES, limit=1, tags=tags),  # type: ignore[arg-type]
                )
            stored = await store.get("pay")
            assert stored is not None
            assert stored.owner is None

    async def test_an_aged_claim_ranks_by_priority_plus_the_steps_waited(self) -> None:
        async with self._store() as store:
            hour = timedelta(hours=1)
            # The store's clock is past T0 (a manual clock at T0 + 4 h, or the real one).
            await self._queued_at(store, "old-low", T0 - hour, priority=0)
            await self._queued_at(store, "new-high", T0, priority=5)
            await self._queued_at(store, "older-low", T0 - 2 * hour, priority=0)
            await self._queued_at(store, "mid", T0, priority=3, tags=frozenset({"x"}))
            strict = await store.claim("a", serves=_SERVES, limit=1, age_step=10**9)
            assert [t.task_id for t in strict] == ["new-high"]  # a step nobody reached
            # 10 minutes a level: 1 h and 2 h of waiting outrank 5 levels of priority.
            aged = await store.claim("b", serves=_SERVES, limit=2, age_step=600)
            assert sorted(t.task_id for t in aged) == ["old-low", "older-low"]
            started = await store.claim_started(
                "c", serves=_SERVES, limit=5, age_step=600, tags=["x"], at=T0
            )
            assert [t.snapshot.task_id for t in started] == ["mid"]  # filters hold when aged

    async def test_a_bad_age_step_is_refused(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "t")
            for step in (0, -1, float("nan"), float("inf"), True, "60", 10**10):
                await _raises(
                    PayloadError,
                    store.claim("a", serves=_SERVES, limit=1, age_step=step),  # type: ignore[arg-type]
                )
            assert [t.task_id for t in await store.claim("a", serves=_SERVES)] == ["t"]
