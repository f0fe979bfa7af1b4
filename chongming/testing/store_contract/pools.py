"""Worker pools: a claim restricted to tasks carrying one of a pool's tags.

Part of the queue: mix :class:`PoolClaimContract` into a contract subclass
of a backend whose ``claim`` and ``claim_started`` take ``tags=``.
"""

from __future__ import annotations

from chongming.errors import PayloadError
from chongming.testing.store_contract._support import HOSTILE_STRINGS, T0, _raises
from chongming.testing.store_contract.queue import QueueContract

__all__ = ["PoolClaimContract"]

_SERVES = {"extract": [None]}


class PoolClaimContract(QueueContract):
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
