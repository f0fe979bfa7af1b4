"""Cluster-wide limits: slots leased by live nodes, judged by the store's clock.

Optional for a third-party store: mix :class:`ClusterLimitContract` into a
contract subclass only if the backend implements ``lease_cluster_slots``.
"""

from __future__ import annotations

import asyncio

from chongming.errors import PayloadError, UnknownClusterLimit
from chongming.stores.base import TaskStore
from chongming.testing.store_contract._support import ContractBase, _node, _raises

__all__ = ["ClusterLimitContract"]


class ClusterLimitContract(ContractBase):
    async def _nodes(self, store: TaskStore, *owners: str, ttl: float | None = None) -> None:
        for owner in owners:
            await store.register_node(_node(owner), ttl_seconds=ttl or self.long_lease_seconds)

    async def _lease(self, store: TaskStore, owner: str, want: int, keep: int = 0) -> int:
        return await store.lease_cluster_slots("api", owner, "inc-1", want=want, keep=keep)

    async def _holders(self, store: TaskStore) -> dict[str, int]:
        (limit,) = [limit for limit in await store.cluster_limits() if limit.name == "api"]
        return dict(limit.holders)

    async def test_declare_creates_once_and_the_stored_capacity_wins(self) -> None:
        async with self._store() as store:
            assert await store.cluster_limits() == []
            assert await store.declare_cluster_limit("api", 3) == 3
            assert await store.declare_cluster_limit("api", 7) == 3
            await store.set_cluster_limit("api", 5)
            assert await store.declare_cluster_limit("api", 7) == 5
            await store.set_cluster_limit("db", 1)
            found = await store.cluster_limits()
            assert [(limit.name, limit.capacity, limit.held) for limit in found] == [
                ("api", 5, 0),
                ("db", 1, 0),
            ]

    async def test_leases_never_grant_more_than_the_capacity_across_nodes(self) -> None:
        async with self._store() as store:
            await store.declare_cluster_limit("api", 3)
            await self._nodes(store, "node-a", "node-b")
            assert await self._lease(store, "node-a", 2) == 2
            assert await self._lease(store, "node-b", 2) == 1  # only one was left
            assert await self._holders(store) == {"node-a": 2, "node-b": 1}
            assert await self._lease(store, "node-a", 0) == 0  # gives both back
            assert await self._lease(store, "node-b", 2) == 2
            assert await self._lease(store, "node-b", 1, keep=1) == 1  # gives one back
            assert await self._holders(store) == {"node-b": 1}

    async def test_many_nodes_racing_for_slots_get_exactly_the_capacity(self) -> None:
        async with self._store() as store:
            await store.declare_cluster_limit("api", 3)
            owners = [f"node-{n}" for n in range(8)]
            await self._nodes(store, *owners)
            granted = await asyncio.gather(*(self._lease(store, owner, 1) for owner in owners))
            assert sorted(granted) == [0] * 5 + [1] * 3
            assert sum((await self._holders(store)).values()) == 3

    async def test_a_lowered_capacity_stops_nothing_and_grants_nothing_new(self) -> None:
        async with self._store() as store:
            await store.declare_cluster_limit("api", 3)
            await self._nodes(store, "node-a", "node-b")
            assert await self._lease(store, "node-a", 3) == 3
            await store.set_cluster_limit("api", 1)
            # node-a runs three: a lease cannot take them away.
            assert await self._lease(store, "node-a", 3, keep=3) == 3
            assert await self._lease(store, "node-b", 1) == 0
            assert await self._lease(store, "node-a", 3, keep=1) == 1
            assert await self._lease(store, "node-b", 1) == 0  # the fleet is at 1 again

    async def test_a_dead_nodes_slots_come_back_when_its_lease_expires(self) -> None:
        async with self._store() as store:
            await store.declare_cluster_limit("api", 2)
            await self._nodes(store, "node-a", ttl=self.lease_seconds)
            await self._nodes(store, "node-b")
            assert await self._lease(store, "node-a", 2) == 2
            assert await self._lease(store, "node-b", 1) == 0

            async def freed() -> bool:
                return await self._lease(store, "node-b", 2) == 2

            assert await self._eventually(freed, "the dead node's slots to come back")
            assert await self._holders(store) == {"node-b": 2}

    async def test_a_released_or_replaced_node_frees_its_slots_at_once(self) -> None:
        async with self._store() as store:
            await store.declare_cluster_limit("api", 2)
            await self._nodes(store, "node-a", "node-b")
            assert await self._lease(store, "node-a", 2) == 2
            await store.release_node("node-a", "inc-1")
            assert await self._lease(store, "node-b", 1) == 1
            # node-a comes back as a new incarnation: its old row does not count.
            await store.register_node(
                _node("node-a", incarnation="inc-2"), ttl_seconds=self.long_lease_seconds
            )
            assert await store.lease_cluster_slots("api", "node-a", "inc-2", want=1, keep=0) == 1
            assert await self._holders(store) == {"node-a": 1, "node-b": 1}

    async def test_a_node_without_a_live_lease_gets_nothing_new(self) -> None:
        async with self._store() as store:
            await store.declare_cluster_limit("api", 3)
            assert await self._lease(store, "ghost", 2) == 0
            # What it already runs it keeps, but peers do not count a dead node's slots.
            assert await self._lease(store, "ghost", 2, keep=1) == 1
            await self._nodes(store, "node-b")
            assert await self._lease(store, "node-b", 3) == 3

    async def test_unknown_limits_and_bad_input_are_refused_and_write_nothing(self) -> None:
        async with self._store() as store:
            await self._nodes(store, "node-a")
            await _raises(UnknownClusterLimit, self._lease(store, "node-a", 1))
            for name in ("", "a\x00b", "x" * 10_000, "\u202e\n", 7):
                await _raises(PayloadError, store.declare_cluster_limit(name, 1))  # type: ignore[arg-type]
                await _raises(PayloadError, store.set_cluster_limit(name, 1))  # type: ignore[arg-type]
            for capacity in (0, -1, True, "3", 1.5, 10**12):
                await _raises(PayloadError, store.declare_cluster_limit("api", capacity))  # type: ignore[arg-type]
            assert await store.cluster_limits() == []
            await store.declare_cluster_limit("api", 2)
            for want, keep in ((-1, 0), (1, 2), (True, 0), (1, -1)):
                await _raises(
                    PayloadError,
                    store.lease_cluster_slots("api", "node-a", "inc-1", want=want, keep=keep),
                )
            await _raises(
                PayloadError, store.lease_cluster_slots("api", "", "inc-1", want=1, keep=0)
            )
            assert await self._holders(store) == {}
