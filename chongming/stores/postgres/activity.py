"""Activity on PostgreSQL: three reads (the literal status list is the finished index's)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from chongming.state.status import TERMINAL_STATUSES, TaskStatus
from chongming.stores.activity import EndCount, check_durations_limit, check_since, check_window
from chongming.stores.postgres.schema import quote_schema

__all__ = ["ActivityMethods"]

_TERMINAL = ", ".join(f"'{status.value}'" for status in sorted(TERMINAL_STATUSES))


class ActivityMethods:
    """The store port's activity methods."""

    _schema: str

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    def _ended(self) -> str:
        return f"FROM {quote_schema(self._schema)}.tasks WHERE status IN ({_TERMINAL})"

    async def end_counts(self, since: datetime, *, minutes: int) -> list[EndCount]:
        since, minutes = check_window(since, minutes)
        sql = (
            "SELECT floor(extract(epoch FROM finished_at - $1) / 60)::int AS minute, status,"
            f" count(*)::int AS n {self._ended()} AND finished_at >= $1 AND finished_at < $2"
            " GROUP BY 1, 2"
        )
        until = since + timedelta(minutes=minutes)
        rows = await self._read("counting ends", lambda c: c.fetch(sql, since, until))
        return [
            EndCount(minute=row["minute"], status=TaskStatus(row["status"]), count=row["n"])
            for row in rows
        ]

    async def recent_durations(self, since: datetime, *, limit: int) -> list[float]:
        since, limit = check_since(since), check_durations_limit(limit)
        sql = (
            "SELECT extract(epoch FROM finished_at - (SELECT max(h.at) FROM"
            f" {quote_schema(self._schema)}.transitions AS h WHERE h.task_id = t.task_id"
            " AND h.from_status = 'starting' AND h.to_status = 'running'))::float8 AS seconds"
            f" {self._ended().replace('.tasks WHERE', '.tasks AS t WHERE')}"
            " AND finished_at >= $1 AND started_at IS NOT NULL"
            " ORDER BY finished_at DESC LIMIT $2"
        )
        rows = await self._read("reading durations", lambda c: c.fetch(sql, since, limit))
        return [max(0.0, row["seconds"]) for row in rows if row["seconds"] is not None]

    async def oldest_queued(self) -> datetime | None:
        sql = (
            f"SELECT min(queued_at) FROM {quote_schema(self._schema)}.tasks"
            " WHERE status = 'queued' AND owner IS NULL"
        )
        found: datetime | None = await self._read(
            "reading the oldest queued task", lambda c: c.fetchval(sql)
        )
        return found
