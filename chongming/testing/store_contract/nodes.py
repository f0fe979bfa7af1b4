"""Nodes: one lease per node, judged by the store's clock."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from chongming.errors import ConfigurationError, NodeConflict, PayloadError
from chongming.stores.nodes import NodeRecord
from chongming.testing.store_contract._support import (
    HOSTILE_STRINGS,
    ContractBase,
    _node,
    _raises,
    make_snapshot,
)

__all__ = ["NodeContract"]


class NodeContract(ContractBase):
    async def test_register_reads_back_every_field_and_the_lease(self) -> None:
        async with self._store() as store:
            assert await store.nodes() == []
            info = _node(
                "node-a",
                host=HOSTILE_STRINGS[1],
                version=HOSTILE_STRINGS[7],
                owned_buckets=frozenset({0, 5, 63}),
            )
            registered = await store.register_node(info, ttl_seconds=self.long_lease_seconds)
            assert registered.info == info
            assert registered.live
            assert registered.started_at == registered.renewed_at
            assert registered.lease_expires_at - registered.renewed_at == timedelta(
                seconds=self.long_lease_seconds
            )
            for moment in (registered.started_at, registered.lease_expires_at):
                assert moment.utcoffset() == timedelta(0)
            everyone = _node("node-b", incarnation="other", owned_buckets=None)
            await store.register_node(everyone, ttl_seconds=self.long_lease_seconds)
            listed = await store.nodes()
            assert [record.info for record in listed] == [info, everyone]
            assert listed[0] == registered

    async def test_a_node_says_what_it_serves(self) -> None:
        async with self._store() as store:
            info = _node("worker", serves=frozenset({"sync@1", "sync@2", HOSTILE_STRINGS[8]}))
            registered = await store.register_node(info, ttl_seconds=self.long_lease_seconds)
            assert registered.info == info
            assert [record.info for record in await store.nodes()] == [info]
            again = dataclasses.replace(info, serves=frozenset({"sync@2"}))
            await store.register_node(again, ttl_seconds=self.long_lease_seconds)
            assert [record.info.serves for record in await store.nodes()] == [again.serves]
            for bad in (frozenset({"nul\x00"}), frozenset({""}), ["sync"]):
                await _raises(
                    PayloadError,
                    store.register_node(
                        _node("other", serves=bad), ttl_seconds=self.long_lease_seconds
                    ),
                )
            assert [record.info.owner for record in await store.nodes()] == ["worker"]

    async def test_a_live_owner_of_another_incarnation_is_refused_and_kept(self) -> None:
        async with self._store() as store:
            first = _node("node-a", "inc-1", host="alpha", pid=11)
            await store.register_node(first, ttl_seconds=self.long_lease_seconds)
            intruder = _node("node-a", "inc-2", host="beta", pid=22)
            conflict = await _raises(
                NodeConflict, store.register_node(intruder, ttl_seconds=self.long_lease_seconds)
            )
            assert (conflict.owner, conflict.host, conflict.pid) == ("node-a", "alpha", 11)
            assert "alpha" in str(conflict)
            assert "11" in str(conflict)
            (record,) = await store.nodes()
            assert record.info == first
            assert record.live

    async def test_the_same_incarnation_registers_again_and_keeps_its_start(self) -> None:
        async with self._store() as store:
            info = _node("node-a")
            first = await store.register_node(info, ttl_seconds=self.long_lease_seconds)
            moved = dataclasses.replace(info, owned_buckets=frozenset({1}))
            again = await store.register_node(moved, ttl_seconds=self.long_lease_seconds)
            assert again.started_at == first.started_at
            assert again.renewed_at >= first.renewed_at
            (record,) = await store.nodes()
            assert record.info == moved

    async def test_an_expired_owner_is_taken_over_by_a_new_incarnation(self) -> None:
        async with self._store() as store:
            old = _node("node-a", "inc-old", pid=1)
            await store.register_node(old, ttl_seconds=self.lease_seconds)

            async def expired() -> list[NodeRecord]:
                return [record for record in await store.nodes() if not record.live]

            (dead,) = await self._eventually(expired, "the node lease to expire")
            assert dead.info == old
            new = _node("node-a", "inc-new", pid=2)
            taken = await store.register_node(new, ttl_seconds=self.long_lease_seconds)
            assert taken.info == new
            assert taken.live
            assert taken.started_at > dead.started_at
            # The old incarnation learns it was replaced, and cannot touch the new row.
            assert await store.renew_node("node-a", "inc-old", ttl_seconds=60) is False
            await store.release_node("node-a", "inc-old")
            (record,) = await store.nodes()
            assert record.info == new
            assert record.live

    async def test_renew_extends_the_lease_and_says_when_the_row_is_not_ours(self) -> None:
        async with self._store() as store:
            await store.register_node(_node("node-a"), ttl_seconds=self.lease_seconds)
            assert await store.renew_node("ghost", "inc-1", ttl_seconds=60) is False
            assert await store.renew_node("node-a", "inc-2", ttl_seconds=60) is False

            async def expired() -> bool:
                return not (await store.nodes())[0].live

            assert await self._eventually(expired, "the node lease to expire")
            # Nobody took the name: the node's own row is renewed, and it is live again.
            assert await store.renew_node("node-a", "inc-1", ttl_seconds=self.long_lease_seconds)
            (record,) = await store.nodes()
            assert record.live
            assert record.lease_expires_at - record.renewed_at == timedelta(
                seconds=self.long_lease_seconds
            )

    async def test_renewal_is_one_row_whatever_the_number_of_tasks(self) -> None:
        async with self._store() as store:
            info = _node("node-a")
            await store.register_node(info, ttl_seconds=self.long_lease_seconds)
            for i in range(20):
                await store.create(make_snapshot(f"t{i}", owner="node-a"))
            snapshots = [await store.get(f"t{i}") for i in range(20)]
            assert await store.renew_node("node-a", "inc-1", ttl_seconds=self.long_lease_seconds)
            # The tasks are untouched by a renewal: no per-task lease exists.
            assert [await store.get(f"t{i}") for i in range(20)] == snapshots

    async def test_release_expires_the_lease_now(self) -> None:
        async with self._store() as store:
            await store.register_node(_node("node-a"), ttl_seconds=self.long_lease_seconds)
            await store.register_node(_node("node-b", "b"), ttl_seconds=self.long_lease_seconds)
            await store.release_node("node-a", "inc-1")
            released, other = await store.nodes()
            assert not released.live
            assert released.lease_expires_at < released.renewed_at + timedelta(
                seconds=self.long_lease_seconds
            )
            assert other.live
            # A released name is free for a new incarnation at once.
            await store.register_node(_node("node-a", "inc-9"), ttl_seconds=60)

    async def test_bad_node_records_and_ttls_are_refused_and_nothing_written(self) -> None:
        async with self._store() as store:
            bad = [
                _node(""),
                _node("nul\x00owner"),
                _node("a", host="lone \ud800"),
                _node("a", version="v" * 10_000),
                _node("a", num_buckets=0),
                _node("a", num_buckets=4, owned_buckets=frozenset({4})),
                _node("a", pid=1 << 63),
            ]
            for info in bad:
                await _raises(PayloadError, store.register_node(info, ttl_seconds=60))
            for ttl in (0, -1.0, float("nan"), float("inf")):
                await _raises(ConfigurationError, store.register_node(_node("a"), ttl_seconds=ttl))
            assert await store.nodes() == []
