"""The in-memory store's commands and node leases."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

from chongming.errors import NodeConflict
from chongming.stores.checks import (
    check_command,
    check_limit_arg,
    check_node,
    check_outcome,
    check_ttl,
)
from chongming.stores.memory.state import MemoryState, _utc
from chongming.stores.nodes import Command, CommandRecord, CommandState, NodeInfo, NodeRecord
from chongming.stores.ports.commands import CommandStore

__all__ = ["CommandsOnMemory"]


class CommandsOnMemory(MemoryState, CommandStore):
    """Commands claimed with a lease; one lease per node, by the store clock."""

    async def submit_command(self, command: Command) -> None:
        self._check_open()
        check_command(command)
        if command.command_id in self._commands:
            return
        self._commands[command.command_id] = dataclasses.replace(
            command, created_at=_utc(command.created_at), claimed_by=None, lease_expires_at=None
        )
        if self._hint is not None:
            self._hint.set()
            self._hint = None

    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        self._check_open()
        now = self._now()
        expires = now + timedelta(seconds=lease_seconds)
        free = [
            c
            for c in self._commands.values()
            if c.command_id not in self._outcomes
            and (c.target_owner is None or c.target_owner == owner)
            and (c.claimed_by is None or c.lease_expires_at is None or c.lease_expires_at <= now)
        ]
        free.sort(key=lambda c: (c.created_at, c.command_id))
        claimed = []
        for command in free[:limit]:
            updated = dataclasses.replace(command, claimed_by=owner, lease_expires_at=expires)
            self._commands[command.command_id] = updated
            claimed.append(updated)
        return claimed

    def _held(self, command_id: str, owner: str) -> Command | None:
        command = self._commands.get(command_id)
        if command is None or command_id in self._outcomes:
            return None
        return command if command.claimed_by == owner else None

    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        self._check_open()
        check_outcome(outcome)
        command = self._held(command_id, owner)
        if command is None:
            return False
        self._outcomes[command_id] = (outcome, self._now())
        self._commands[command_id] = dataclasses.replace(command, lease_expires_at=None)
        return True

    async def release_command(self, command_id: str, owner: str) -> bool:
        self._check_open()
        command = self._held(command_id, owner)
        if command is None:
            return False
        self._commands[command_id] = dataclasses.replace(
            command, claimed_by=None, lease_expires_at=None
        )
        return True

    async def wait_command_hint(self) -> None:
        """Return once a command is submitted to this store (or it is closed)."""
        self._check_open()
        if self._hint is None:
            self._hint = asyncio.Event()
        await self._hint.wait()
        self._check_open()

    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        self._check_open()
        check_limit_arg(limit)
        now = self._now()
        found = [c for c in self._commands.values() if task_id is None or c.task_id == task_id]
        found.sort(key=lambda c: (c.created_at, c.command_id), reverse=True)
        records = []
        for command in found[:limit]:
            done = self._outcomes.get(command.command_id)
            if done is not None:
                records.append(
                    CommandRecord(
                        command=command,
                        state=CommandState.DONE,
                        outcome=done[0],
                        completed_at=done[1],
                    )
                )
                continue
            claimed = (
                command.claimed_by is not None
                and command.lease_expires_at is not None
                and command.lease_expires_at > now
            )
            state = CommandState.CLAIMED if claimed else CommandState.PENDING
            records.append(CommandRecord(command=command, state=state))
        return records

    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        self._check_open()
        check_node(info)
        ttl = check_ttl(ttl_seconds)
        now = self._now()
        current = self._nodes.get(info.owner)
        started = now
        if current is not None:
            same = current.info.incarnation == info.incarnation
            if not same and current.lease_expires_at > now:
                raise NodeConflict(info.owner, current.info.host, current.info.pid)
            if same:
                started = current.started_at
        record = NodeRecord(
            info=info,
            started_at=started,
            renewed_at=now,
            lease_expires_at=now + timedelta(seconds=ttl),
            live=True,
        )
        self._nodes[info.owner] = record
        return record

    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        self._check_open()
        ttl = check_ttl(ttl_seconds)
        current = self._own_node(owner, incarnation)
        if current is None:
            return False
        now = self._now()
        self._nodes[owner] = dataclasses.replace(
            current, renewed_at=now, lease_expires_at=now + timedelta(seconds=ttl)
        )
        return True

    async def release_node(self, owner: str, incarnation: str) -> None:
        self._check_open()
        current = self._own_node(owner, incarnation)
        if current is not None:
            self._nodes[owner] = dataclasses.replace(current, lease_expires_at=self._now())

    async def nodes(self) -> list[NodeRecord]:
        self._check_open()
        now = self._now()
        return [
            dataclasses.replace(record, live=record.lease_expires_at > now)
            for _, record in sorted(self._nodes.items())
        ]
