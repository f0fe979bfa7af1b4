"""Activity on PostgreSQL: two reads, each through a partial index."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from chongming.state.status import TERMINAL_STATUSES, TaskStatus
from chongming.stores.activity import TaskEnd, check_ends
from chongming.stores.postgres.schema import quote_schema

__all__ = ["ActivityMethods"]

_TERMINAL = ", ".join(f"'{status.value}'" for status in sorted(TERMINAL_STATUSES))


class ActivityMethods:
    """The store port's activity methods (the literal status list is the finished index's)."""

    _schema: str

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    async def recent_ends(self, since: datetime, *, limit: int) -> list[TaskEnd]:
        since, limit = check_ends(since, limit)
        sql = (
            f"SELECT status, finished_at, started_at FROM {quote_schema(self._schema)}.tasks"
            f" WHERE status IN ({_TERMINAL}) AND finished_at >= $1"
            " ORDER BY finished_at DESC LIMIT $2"
        )
        rows = await self._read("reading recent ends", lambda c: c.fetch(sql, since, limit))
        return [
            TaskEnd(
                status=TaskStatus(row["status"]),
                finished_at=row["finished_at"],
                started_at=row["started_at"],
            )
            for row in rows
        ]

    async def oldest_queued(self) -> datetime | None:
        sql = (
            f"SELECT min(queued_at) FROM {quote_schema(self._schema)}.tasks"
            " WHERE status = 'queued' AND owner IS NULL"
        )
        found: datetime | None = await self._read(
            "reading the oldest queued task", lambda c: c.fetchval(sql)
        )
        return found
