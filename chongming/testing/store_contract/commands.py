"""Commands: claims with leases, completion with outcomes, the records the CLI lists."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from chongming.errors import PayloadError
from chongming.stores.checks import MAX_OUTCOME_CHARS
from chongming.stores.nodes import Command, CommandKind, CommandState
from chongming.testing.store_contract._support import (
    HOSTILE_STRINGS,
    T0,
    ContractBase,
    _command,
    _raises,
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

    # -- outcomes and records -----------------------------------------------

    async def test_complete_records_the_outcome_and_records_list_newest_first(self) -> None:
        async with self._store() as store:
            for i in range(4):
                await store.submit_command(
                    _command(
                        f"c{i}", task_id="t" if i < 3 else "u", created_at=T0 + timedelta(seconds=i)
                    )
                )
            claimed = await store.claim_commands(
                "node-a", lease_seconds=self.long_lease_seconds, limit=2
            )
            assert [c.command_id for c in claimed] == ["c0", "c1"]
            assert await store.complete_command(
                "c0", "node-a", outcome="applied: running -> stopping"
            )
            assert await store.complete_command("c1", "node-b", outcome="not mine") is False

            records = await store.command_records()
            assert [r.command.command_id for r in records] == ["c3", "c2", "c1", "c0"]
            by_id = {r.command.command_id: r for r in records}
            assert by_id["c0"].state is CommandState.DONE
            assert by_id["c0"].outcome == "applied: running -> stopping"
            assert by_id["c0"].completed_at is not None
            assert by_id["c0"].completed_at.utcoffset() == timedelta(0)
            assert by_id["c1"].state is CommandState.CLAIMED
            assert (by_id["c1"].outcome, by_id["c1"].completed_at) == (None, None)
            assert by_id["c1"].command.claimed_by == "node-a"
            assert by_id["c2"].state is CommandState.PENDING
            assert by_id["c2"].command == _command("c2", created_at=T0 + timedelta(seconds=2))

            of_t = await store.command_records(task_id="t", limit=2)
            assert [r.command.command_id for r in of_t] == ["c2", "c1"]
            assert await store.command_records(task_id="nobody") == []

    async def test_complete_without_outcome_and_a_claim_that_ran_out_is_pending(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.submit_command(_command("c2", created_at=T0 + timedelta(seconds=1)))
            await store.claim_commands("node-a", lease_seconds=self.lease_seconds)
            assert await store.complete_command("c1", "node-a")
            done = {r.command.command_id: r for r in await store.command_records()}["c1"]
            assert done.state is CommandState.DONE
            assert done.outcome is None

            async def c2_pending() -> bool:
                records = {r.command.command_id: r for r in await store.command_records()}
                return records["c2"].state is CommandState.PENDING

            assert await self._eventually(c2_pending, "the claim of c2 to run out")

    async def test_bad_outcome_text_is_refused_and_the_command_stays_open(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.claim_commands("node-a", lease_seconds=self.long_lease_seconds)
            for bad in ("nul\x00inside", "lone \ud800 surrogate", "x" * (MAX_OUTCOME_CHARS + 1)):
                await _raises(PayloadError, store.complete_command("c1", "node-a", outcome=bad))
            (record,) = await store.command_records()
            assert record.state is CommandState.CLAIMED
            hostile = "".join(HOSTILE_STRINGS)[:MAX_OUTCOME_CHARS]
            assert await store.complete_command("c1", "node-a", outcome=hostile)
            (record,) = await store.command_records()
            assert record.outcome == hostile
