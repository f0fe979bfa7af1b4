"""Commands (claimed with leases) and node leases, on the server's clock.

Kept apart from the snapshot half of the store because the consistency story
differs: a claim is made unambiguous by a per-call claim token (after a
connection error, the rows carrying the token are exactly what the lost call
claimed), completions are resolved by re-reading the command row, and a
registration by re-reading the node row (ours if it carries our incarnation).
Renewals and releases are idempotent and simply retried.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from chongming.stores.ports.commands import CommandStore
from chongming.stores.postgres.driver import translating

if TYPE_CHECKING:
    from chongming.stores.postgres.listener import CommandListener

from chongming.errors import ConfigurationError, NodeConflict, StoreError, StoreUnavailable
from chongming.stores.base import count_key
from chongming.stores.checks import check_limit_arg, check_node, check_outcome, check_ttl
from chongming.stores.codec import STATUS_OF
from chongming.stores.nodes import (
    Command,
    CommandRecord,
    CommandState,
    NodeInfo,
    NodeRecord,
    TaskCount,
)
from chongming.stores.postgres import rows
from chongming.stores.postgres.driver import is_connection_error
from chongming.stores.postgres.sql import Statements

__all__ = ["CommandMethods", "CommandsAndNodes", "channel_for", "notify_payload"]

T = TypeVar("T")
Work = Callable[[Any], Awaitable[T]]
Runner = Callable[[str, Work[Any]], Awaitable[Any]]

_NOTIFY_LIMIT = 7900  # PostgreSQL refuses payloads of 8000 bytes or more


def notify_payload(command: Command) -> str:
    """Ids only, and always under PostgreSQL's 8000-byte limit."""
    import json

    for data in (
        {"command_id": command.command_id, "task_id": command.task_id},
        {"command_id": command.command_id},
    ):
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if len(text.encode()) < _NOTIFY_LIMIT:
            return text
    return "{}"


def channel_for(schema: str) -> str:
    """The NOTIFY channel of a schema (at most 63 bytes, PostgreSQL's identifier limit)."""
    channel = f"chongming:{schema}"
    if len(channel.encode()) > 63:
        channel = "chongming:" + hashlib.blake2b(schema.encode(), digest_size=16).hexdigest()
    return channel


class CommandsAndNodes:
    """Command and node operations; the store supplies the I/O.

    ``read`` runs work with bounded retries (idempotent operations);
    ``once`` runs it a single time and lets connection errors through raw, so
    the caller can resolve the ambiguity; ``fail`` translates a raw error.
    """

    def __init__(
        self,
        sql: Statements,
        channel: str,
        *,
        read: Runner,
        once: Runner,
        fail: Callable[[BaseException, str], Any],
        attempts: int,
    ) -> None:
        self._sql = sql
        self._channel = channel
        self._read = read
        self._once = once
        self._fail = fail
        self._attempts = attempts

    async def submit(self, command: Command) -> None:
        rows.check_command(command)
        args = (
            command.command_id,
            command.task_id,
            command.kind.value,
            command.created_at,
            command.actor,
            command.reason,
            command.target_owner,
            self._channel,
            notify_payload(command),
        )
        what = f"submitting command {command.command_id!r}"

        async def resolve() -> bool:
            row = await self._read(
                what, lambda c: c.fetchrow(self._sql.get_command, command.command_id)
            )
            return row is not None

        await self._ambiguous(what, lambda c: c.fetchrow(self._sql.insert_command, *args), resolve)

    async def claim(self, owner: str, lease_seconds: float, limit: int) -> list[Command]:
        if not lease_seconds > 0:
            raise ConfigurationError(f"lease_seconds must be positive, got {lease_seconds}")
        if limit < 1:
            raise ConfigurationError(f"limit must be positive, got {limit}")
        token = uuid.uuid4().hex
        what = f"claiming commands for {owner!r}"
        found: list[Any] | None = None

        async def resolve() -> bool:
            nonlocal found
            found = await self._read(
                what, lambda c: c.fetch(self._sql.claimed_with_token, token, owner)
            )
            return bool(found)

        claimed = await self._ambiguous(
            what,
            lambda c: c.fetch(self._sql.claim, owner, float(lease_seconds), limit, token),
            resolve,
        )
        records = found if claimed is None else claimed
        ordered = sorted(records or (), key=lambda row: (row["created_at"], row["command_id"]))
        return [rows.command_from_row(row) for row in ordered]

    async def complete(self, command_id: str, owner: str, outcome: str | None) -> bool:
        check_outcome(outcome)
        what = f"completing command {command_id!r}"
        done = False

        async def resolve() -> bool:
            nonlocal done
            row = await self._read(what, lambda c: c.fetchrow(self._sql.get_command, command_id))
            if row is None or row["claimed_by"] != owner:
                return True  # settled: not ours (any more)
            done = row["completed_at"] is not None and row["completed_by"] == owner
            return done

        status = await self._ambiguous(
            what, lambda c: c.execute(self._sql.complete, command_id, owner, outcome), resolve
        )
        return done if status is None else status.endswith(" 1")

    async def release(self, command_id: str, owner: str) -> bool:
        what = f"releasing command {command_id!r}"

        async def resolve() -> bool:
            row = await self._read(what, lambda c: c.fetchrow(self._sql.get_command, command_id))
            # Still ours: not released yet, run it again. Otherwise it is handed back.
            return row is None or row["claimed_by"] != owner

        status = await self._ambiguous(
            what, lambda c: c.execute(self._sql.release, command_id, owner), resolve
        )
        return True if status is None else status.endswith(" 1")

    async def records(self, task_id: str | None, limit: int) -> list[CommandRecord]:
        check_limit_arg(limit)
        if task_id is None:
            found = await self._read(
                "listing commands", lambda c: c.fetch(self._sql.records_all, limit)
            )
        else:
            found = await self._read(
                f"listing the commands of {task_id!r}",
                lambda c: c.fetch(self._sql.records_of_task, task_id, limit),
            )
        return [_record_from_row(row) for row in found]

    # -- nodes -----------------------------------------------------------------

    async def register_node(self, info: NodeInfo, ttl_seconds: float) -> NodeRecord:
        check_node(info)
        ttl = check_ttl(ttl_seconds)
        owned = None if info.owned_buckets is None else sorted(info.owned_buckets)
        args = (
            info.owner,
            info.incarnation,
            info.host,
            info.pid,
            info.version,
            info.num_buckets,
            owned,
            ttl,
            sorted(info.serves),
        )
        what = f"registering node {info.owner!r}"
        for _ in range(self._attempts):
            mine: Any = None

            async def resolve() -> bool:
                nonlocal mine
                row = await self._read(what, lambda c: c.fetchrow(self._sql.get_node, info.owner))
                if row is not None and row["incarnation"] == info.incarnation:
                    mine = row
                    return True
                return False  # not taken: run it again

            taken = await self._ambiguous(
                what, lambda c: c.fetchrow(self._sql.register_node, *args), resolve
            )
            row = mine if taken is None else taken
            if row is not None:
                return _node_from_row(row)
            holder = await self._read(what, lambda c: c.fetchrow(self._sql.get_node, info.owner))
            if holder is not None and holder["live"]:
                raise NodeConflict(info.owner, holder["host"], holder["pid"])
            # The holder's lease ran out (or the row went) between the two statements: again.
        raise StoreUnavailable(f"{what}: the owner's row kept changing; try again")

    async def renew_node(self, owner: str, incarnation: str, ttl_seconds: float) -> bool:
        ttl = check_ttl(ttl_seconds)
        # Idempotent (the expiry is recomputed from the server's clock): plain retries.
        status = await self._read(
            f"renewing node {owner!r}",
            lambda c: c.execute(self._sql.renew_node, owner, incarnation, ttl),
        )
        return str(status).endswith(" 1")

    async def release_node(self, owner: str, incarnation: str) -> None:
        await self._read(
            f"releasing node {owner!r}",
            lambda c: c.execute(self._sql.release_node, owner, incarnation),
        )

    async def nodes(self) -> list[NodeRecord]:
        found = await self._read("listing nodes", lambda c: c.fetch(self._sql.nodes))
        return [_node_from_row(row) for row in found]

    async def task_counts(self, *, active_only: bool) -> list[TaskCount]:
        sql = self._sql.counts_active if active_only else self._sql.counts_all
        found = await self._read("counting tasks", lambda conn: conn.fetch(sql))
        counts = [
            TaskCount(
                status=STATUS_OF[row["status"]],
                bucket=row["bucket"],
                owner=row["owner"],
                count=row["count"],
            )
            for row in found
        ]
        counts.sort(key=count_key)
        return counts

    async def _ambiguous(
        self, what: str, work: Work[T], resolve: Callable[[], Awaitable[bool]]
    ) -> T | None:
        """Run ``work``; after a connection error, ``resolve`` says whether it took effect.

        Returns the work's result, or ``None`` when a re-read settled the outcome.
        """
        last: BaseException | None = None
        for attempt in range(self._attempts):
            if attempt:
                try:
                    if await resolve():
                        return None
                except StoreError:
                    raise StoreUnavailable(
                        f"{what}: the connection failed and the outcome could not be "
                        "re-read; it may or may not have been written"
                    ) from None
            try:
                result: T = await self._once(what, work)
            except (StoreError, ConfigurationError):
                raise
            except Exception as error:
                if not is_connection_error(error):
                    self._fail(error, what)
                last = error
                continue
            return result
        assert last is not None
        self._fail(last, what)
        return None


def _node_from_row(row: Mapping[str, Any]) -> NodeRecord:
    owned = row["owned_buckets"]
    return NodeRecord(
        info=NodeInfo(
            owner=row["owner"],
            incarnation=row["incarnation"],
            host=row["host"],
            pid=row["pid"],
            version=row["version"],
            num_buckets=row["num_buckets"],
            owned_buckets=None if owned is None else frozenset(owned),
            serves=frozenset(row["serves"]),
        ),
        started_at=row["started_at"],
        renewed_at=row["renewed_at"],
        lease_expires_at=row["lease_expires_at"],
        live=bool(row["live"]),
    )


def _record_from_row(row: Mapping[str, Any]) -> CommandRecord:
    command = rows.command_from_row(row)
    if row["completed_at"] is not None:
        return CommandRecord(
            command=command,
            state=CommandState.DONE,
            outcome=row["outcome"],
            completed_at=row["completed_at"],
        )
    expires = row["lease_expires_at"]
    claimed = command.claimed_by is not None and expires is not None and expires > row["now"]
    return CommandRecord(
        command=command, state=CommandState.CLAIMED if claimed else CommandState.PENDING
    )


class CommandMethods(CommandStore):
    """The port's command, node and count methods, for ``PostgresTaskStore`` (its ``_commands``)."""

    _commands: CommandsAndNodes
    _listener: CommandListener

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        async def open(self) -> None: ...

        def _scrub(self, text: str) -> str: ...

    async def submit_command(self, command: Command) -> None:
        await self._commands.submit(command)

    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        return await self._commands.claim(owner, lease_seconds, limit)

    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        return await self._commands.complete(command_id, owner, outcome)

    async def release_command(self, command_id: str, owner: str) -> bool:
        return await self._commands.release(command_id, owner)

    async def wait_command_hint(self) -> None:
        """Return when a command may have arrived, or after the listener reconnected.

        Only a hint: poll afterwards. The first call (and any call after the
        listening session was lost) returns as soon as LISTEN is in place,
        because notifications sent before that were missed.

        Cancellation: safe; the listener connection stays for the next call.
        """
        self._check_open()
        await self.open()
        with translating("waiting for a command notification", self._scrub):
            await self._listener.wait()
        self._check_open()

    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        return await self._commands.records(task_id, limit)

    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        return await self._commands.register_node(info, ttl_seconds)

    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        return await self._commands.renew_node(owner, incarnation, ttl_seconds)

    async def release_node(self, owner: str, incarnation: str) -> None:
        await self._commands.release_node(owner, incarnation)

    async def nodes(self) -> list[NodeRecord]:
        return await self._commands.nodes()

    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        return await self._commands.task_counts(active_only=active_only)
