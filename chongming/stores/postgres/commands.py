"""Commands (claimed with leases) and supervisor leases, on the server's clock.

Kept apart from the snapshot half of the store because the consistency story
differs: a claim is made unambiguous by a per-call claim token (after a
connection error, the rows carrying the token are exactly what the lost call
claimed), and completions are resolved by re-reading the command row.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

from chongming.errors import ConfigurationError, StoreError, StoreUnavailable
from chongming.stores.base import Command, ExpiredLease
from chongming.stores.postgres import rows
from chongming.stores.postgres.driver import is_connection_error
from chongming.stores.postgres.sql import Statements

__all__ = ["CommandsAndLeases", "channel_for", "notify_payload"]

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


class CommandsAndLeases:
    """Command and lease operations; the store supplies the I/O.

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

    async def complete(self, command_id: str, owner: str) -> bool:
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
            what, lambda c: c.execute(self._sql.complete, command_id, owner), resolve
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

    async def renew(self, owner: str, task_ids: Collection[str], ttl_seconds: float) -> None:
        if not ttl_seconds > 0:
            raise ConfigurationError(f"ttl_seconds must be positive, got {ttl_seconds}")
        ids = sorted(set(task_ids))
        if not ids:
            return
        # Idempotent (the expiry is recomputed from the server's clock): plain retries.
        await self._read(
            f"renewing leases of {owner!r}",
            lambda c: c.execute(self._sql.renew, owner, ids, float(ttl_seconds)),
        )

    async def expired(self, buckets: Collection[int] | None) -> list[ExpiredLease]:
        if buckets is None:
            found = await self._read(
                "reading expired leases", lambda c: c.fetch(self._sql.expired_all)
            )
        else:
            wanted = sorted(set(buckets))
            found = await self._read(
                "reading expired leases",
                lambda c: c.fetch(self._sql.expired_in_buckets, wanted),
            )
        return [
            ExpiredLease(
                snapshot=rows.snapshot_from_row(row),
                lease_owner=row["lease_owner"],
                lease_expires_at=row["lease_expires_at"],
            )
            for row in found
        ]

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
