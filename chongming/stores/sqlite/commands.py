"""The SQLite store's commands and node leases (their writer-side SQL: ``nodes.py``).

Every decision runs in the writer's transaction, judged by the store clock
raised to its stored high-water mark; ``claim_commands`` polls cheaply (see
:mod:`chongming.stores.sqlite.store`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from chongming.errors import StoreClosed
from chongming.stores.checks import (
    check_command,
    check_limit_arg,
    check_node,
    check_outcome,
    check_ttl,
)
from chongming.stores.nodes import Command, CommandRecord, NodeInfo, NodeRecord
from chongming.stores.ports.commands import CommandStore
from chongming.stores.sqlite import rows as r
from chongming.stores.sqlite.batch import CommandOp
from chongming.stores.sqlite.internals import SqliteInternals
from chongming.stores.sqlite.nodes import RECORD_SELECT, command_record_from_row

__all__ = ["ClaimLook", "CommandsOnSqlite"]


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimLook:
    """What the last claim of one owner saw (see "cheap polling" in the module docstring)."""

    data_version: int | None
    claimable_writes: int
    full: bool
    next_expiry: int | None


class CommandsOnSqlite(SqliteInternals, CommandStore):
    """The SQLite store's commands and node leases (their writer-side SQL: ``nodes.py``)."""

    async def submit_command(self, command: Command) -> None:
        check_command(command)
        future = self._future()
        await self._write(CommandOp(future=future, action="submit", params=r.command_row(command)))

    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        """Claim as the port says; skipped cheaply when nothing can have changed (see above)."""
        lease = round(check_ttl(lease_seconds, "lease_seconds") * 1_000_000)
        check_limit_arg(limit)
        if self._writer is None:
            await self.open()
        writer = self._writer
        if writer is None or self._closed:
            raise StoreClosed(repr(self))
        version = await self._data_version()
        local = writer.claimable_writes
        look = self._looks.get(owner)
        if (
            look is not None
            and look.data_version == version
            and look.claimable_writes == local
            and not look.full
            and (look.next_expiry is None or self._now_micros() < look.next_expiry)
        ):
            self.claims_skipped += 1
            return []
        self._looks.pop(owner, None)
        future = self._future()
        claimed, next_expiry = await self._write(
            CommandOp(future=future, action="claim", params=(owner, lease, limit))
        )
        self._looks[owner] = ClaimLook(
            data_version=version,
            claimable_writes=local,
            full=len(claimed) >= limit,
            next_expiry=next_expiry,
        )
        result: list[Command] = claimed
        return result

    async def _data_version(self) -> int | None:
        """The reader's ``PRAGMA data_version`` (``None`` on ``":memory:"``: no other reader)."""
        if self._memory:
            return None
        for row in await self._read("PRAGMA data_version"):
            return int(row[0])
        return None  # pragma: no cover - the pragma always answers

    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        check_outcome(outcome)
        future = self._future()
        done: bool = await self._write(
            CommandOp(future=future, action="complete", params=(command_id, owner, outcome))
        )
        return done

    async def release_command(self, command_id: str, owner: str) -> bool:
        future = self._future()
        released: bool = await self._write(
            CommandOp(future=future, action="release", params=(command_id, owner))
        )
        return released

    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        check_limit_arg(limit)
        order = " ORDER BY created_at DESC, command_id DESC LIMIT ?"
        params: tuple[Any, ...]
        if task_id is None:
            sql, params = RECORD_SELECT + order, (limit,)
        else:
            sql, params = RECORD_SELECT + " WHERE task_id = ?" + order, (task_id, limit)
        found = list(await self._read(sql, params))
        now = await self._guarded_now()
        return [command_record_from_row(row, now) for row in found]

    async def wait_command_hint(self) -> None:
        """Return when this process submits a command (other processes: poll)."""
        if self._closed:
            raise StoreClosed(repr(self))
        if self._hint is None:
            self._hint = asyncio.Event()
        await self._hint.wait()
        if self._closed:
            raise StoreClosed(repr(self))

    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        check_node(info)
        ttl = round(check_ttl(ttl_seconds) * 1_000_000)
        record: NodeRecord = await self._node_op("register_node", info, ttl)
        return record

    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        ttl = round(check_ttl(ttl_seconds) * 1_000_000)
        renewed: bool = await self._node_op("renew_node", owner, incarnation, ttl)
        return renewed

    async def release_node(self, owner: str, incarnation: str) -> None:
        await self._node_op("release_node", owner, incarnation)

    async def nodes(self) -> list[NodeRecord]:
        """Judged inside a write transaction that raises the stored clock high-water."""
        found: list[NodeRecord] = await self._node_op("nodes")
        return found
