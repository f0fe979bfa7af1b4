"""Commands and supervisor leases."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from chongming.state.records import Progress
from chongming.stores.base import Command, CommandKind
from chongming.testing.store_contract._support import (
    _S,
    T0,
    ContractBase,
    _command,
    make_snapshot,
    next_step,
)

__all__ = ["CommandContract"]


class CommandContract(ContractBase):
    # -- commands ------------------------------------------------------------

    async def test_claim_sets_owner_and_lease(self) -> None:
        async with self._store() as store:
            command = _command("c1", reason="user asked", actor="cli")
            await store.submit_command(command)
            (claimed,) = await store.claim_commands("node-a", lease_seconds=30)
            assert claimed.claimed_by == "node-a"
            assert claimed.lease_expires_at is not None
            assert claimed.lease_expires_at.utcoffset() == timedelta(0)
            assert dataclasses.replace(claimed, claimed_by=None, lease_expires_at=None) == command

    async def test_a_leased_command_is_not_claimed_twice(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            assert (
                len(await store.claim_commands("node-a", lease_seconds=self.long_lease_seconds))
                == 1
            )
            assert await store.claim_commands("node-b", lease_seconds=30) == []
            assert await store.claim_commands("node-a", lease_seconds=30) == []

    async def test_resubmitting_a_command_id_is_a_no_op(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.submit_command(_command("c1", kind=CommandKind.PAUSE))
            claimed = await store.claim_commands("node-a", lease_seconds=30)
            assert [(c.command_id, c.kind) for c in claimed] == [("c1", CommandKind.STOP)]

    async def test_claim_is_oldest_first_and_bounded_by_limit(self) -> None:
        async with self._store() as store:
            for i in (3, 1, 4, 0, 2):
                await store.submit_command(
                    _command(f"c{i}", created_at=T0 + timedelta(milliseconds=i))
                )
            first = await store.claim_commands("node-a", lease_seconds=30, limit=2)
            rest = await store.claim_commands("node-a", lease_seconds=30, limit=10)
            assert [c.command_id for c in first] == ["c0", "c1"]
            assert [c.command_id for c in rest] == ["c2", "c3", "c4"]

    async def test_claim_honours_target_owner(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("for-b", target_owner="node-b"))
            await store.submit_command(_command("anyone", created_at=T0 + timedelta(seconds=1)))
            mine = await store.claim_commands("node-a", lease_seconds=30)
            assert [c.command_id for c in mine] == ["anyone"]
            theirs = await store.claim_commands("node-b", lease_seconds=30)
            assert [(c.command_id, c.target_owner) for c in theirs] == [("for-b", "node-b")]

    async def test_complete_needs_the_holder_and_ends_the_command(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.submit_command(_command("c2", created_at=T0 + timedelta(seconds=1)))
            claimed = await store.claim_commands("node-a", lease_seconds=self.lease_seconds)
            assert [c.command_id for c in claimed] == ["c1", "c2"]
            assert await store.complete_command("c1", "node-b") is False
            assert await store.complete_command("unknown", "node-a") is False
            assert await store.complete_command("c1", "node-a") is True
            assert await store.complete_command("c1", "node-a") is False

            # c2 was claimed with c1, under the same lease: once c2 can be claimed again,
            # c1's lease has run out too, and a completed command must still not come back.
            async def claim_by_b() -> list[Command]:
                return await store.claim_commands("node-b", lease_seconds=self.long_lease_seconds)

            reclaimed = await self._eventually(claim_by_b, "the shared lease to expire")
            assert [c.command_id for c in reclaimed] == ["c2"]

    async def test_release_hands_the_command_back_untouched(self) -> None:
        async with self._store() as store:
            command = _command("c1", target_owner=None, reason="because")
            await store.submit_command(command)
            await store.claim_commands("node-a", lease_seconds=self.long_lease_seconds)
            assert await store.release_command("c1", "node-b") is False
            assert await store.release_command("c1", "node-a") is True
            assert await store.release_command("c1", "node-a") is False
            (again,) = await store.claim_commands("node-b", lease_seconds=30)
            assert again.claimed_by == "node-b"
            assert dataclasses.replace(again, claimed_by=None, lease_expires_at=None) == command

    async def test_an_expired_command_lease_can_be_claimed_again(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.claim_commands("node-a", lease_seconds=self.lease_seconds)

            async def claim_by_b() -> list[Command]:
                return await store.claim_commands("node-b", lease_seconds=self.long_lease_seconds)

            (reclaimed,) = await self._eventually(claim_by_b, "the command lease to expire")
            assert reclaimed.claimed_by == "node-b"
            assert await store.complete_command("c1", "node-a") is False
            assert await store.release_command("c1", "node-a") is False
            assert await store.complete_command("c1", "node-b") is True

    # -- supervisor leases ---------------------------------------------------

    async def test_never_leased_active_tasks_are_reported_terminal_never(self) -> None:
        async with self._store() as store:
            await store.create(make_snapshot("active", status=_S.RUNNING, status_version=3))
            for i, status in enumerate(sorted(_S, key=str)):
                if status.is_terminal:
                    await store.create(make_snapshot(f"done-{i}", status=status, status_version=4))
            (lease,) = await store.expired_leases()
            assert lease.snapshot == await store.get("active")
            assert (lease.lease_owner, lease.lease_expires_at) == (None, None)

    async def test_renewed_leases_expire_after_their_ttl(self) -> None:
        async with self._store() as store:
            for task_id in ("a", "b", "done"):
                status = _S.SUCCEEDED if task_id == "done" else _S.RUNNING
                await store.create(make_snapshot(task_id, status=status, status_version=4))
            await store.renew_leases("node-a", ["a", "done"], ttl_seconds=self.lease_seconds)
            await store.renew_leases("node-b", ["b"], ttl_seconds=self.long_lease_seconds)
            await store.renew_leases("node-a", ["ghost"], ttl_seconds=self.lease_seconds)
            assert await store.get("ghost") is None

            async def expired_ids() -> list[str]:
                return [lease.snapshot.task_id for lease in await store.expired_leases()]

            assert await self._eventually(expired_ids, "the lease of 'a' to expire") == ["a"]
            (lease,) = await store.expired_leases()
            assert lease.lease_owner == "node-a"
            assert lease.lease_expires_at is not None
            assert lease.lease_expires_at.utcoffset() == timedelta(0)
            await store.renew_leases("node-a", ["a"], ttl_seconds=self.long_lease_seconds)
            assert await store.expired_leases() == []

    async def test_expired_leases_filter_by_bucket(self) -> None:
        async with self._store() as store:
            for bucket in (None, 0, 1, 2):
                task_id = f"b-{bucket}"
                await store.create(make_snapshot(task_id, status=_S.QUEUED, bucket=bucket))
            found = await store.expired_leases(buckets=frozenset({0, 2}))
            assert sorted(lease.snapshot.task_id for lease in found) == ["b-0", "b-2"]
            assert await store.expired_leases(buckets=frozenset()) == []
            assert len(await store.expired_leases()) == 4

    async def test_save_never_touches_the_lease(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t", status=_S.QUEUED, status_version=1, owner="node-a")
            await store.create(snapshot)
            await store.renew_leases("node-a", ["t"], ttl_seconds=self.long_lease_seconds)
            starting, transition = next_step(snapshot, _S.STARTING)
            await store.save(starting, expect_version=1, transitions=[transition])
            await store.touch("t", progress=Progress(done=1), heartbeat=T0)
            assert await store.expired_leases() == []
            await store.renew_leases("node-b", ["t"], ttl_seconds=self.lease_seconds)

            async def expired() -> list[Any]:
                return await store.expired_leases()

            (lease,) = await self._eventually(expired, "the lease to expire")
            assert lease.lease_owner == "node-b"
            assert lease.snapshot.status is _S.STARTING
