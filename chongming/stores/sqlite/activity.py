"""Activity on SQLite: two reads on the reader connection, each through a partial index."""

from __future__ import annotations

from datetime import datetime

from chongming.state.status import TERMINAL_STATUSES, TaskStatus
from chongming.stores.activity import TaskEnd, check_ends
from chongming.stores.ports.activity import ActivityStore
from chongming.stores.sqlite.internals import SqliteInternals
from chongming.stores.sqlite.rows import from_micros, to_micros

__all__ = ["ActivityOnSqlite"]

_TERMINAL = ", ".join(f"'{status.value}'" for status in sorted(TERMINAL_STATUSES))
# The literal IN list is the predicate of the index of finished tasks (*_retention).
_ENDS = (
    f"SELECT status, finished_at, started_at FROM tasks WHERE status IN ({_TERMINAL})"
    " AND finished_at >= ? ORDER BY finished_at DESC LIMIT ?"
)
# The claimable index (*_queue) holds queued_at for the queued tasks nobody holds.
_OLDEST = "SELECT min(queued_at) FROM tasks WHERE status = 'queued' AND owner IS NULL"


class ActivityOnSqlite(SqliteInternals, ActivityStore):
    async def recent_ends(self, since: datetime, *, limit: int) -> list[TaskEnd]:
        since, limit = check_ends(since, limit)
        rows = await self._read(_ENDS, (to_micros(since, "since"), limit))
        return [
            TaskEnd(
                status=TaskStatus(status),
                finished_at=from_micros(finished),
                started_at=None if started is None else from_micros(started),
            )
            for status, finished, started in rows
        ]

    async def oldest_queued(self) -> datetime | None:
        rows = list(await self._read(_OLDEST))
        value = rows[0][0] if rows else None
        return None if value is None else from_micros(value)
