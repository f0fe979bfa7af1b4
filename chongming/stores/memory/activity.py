"""The in-memory store's activity reads: the oracle the SQL backends are checked against."""

from __future__ import annotations

from datetime import datetime

from chongming.state.status import TaskStatus
from chongming.stores.activity import TaskEnd, check_ends
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.activity import ActivityStore

__all__ = ["ActivityOnMemory"]


class ActivityOnMemory(MemoryState, ActivityStore):
    """Scans the dict (a memory store is small by nature)."""

    async def recent_ends(self, since: datetime, *, limit: int) -> list[TaskEnd]:
        self._check_open()
        since, limit = check_ends(since, limit)
        ends = [
            TaskEnd(status=s.status, finished_at=s.finished_at, started_at=s.started_at)
            for s in self._tasks.values()
            if s.status.is_terminal and s.finished_at is not None and s.finished_at >= since
        ]
        ends.sort(key=lambda end: end.finished_at, reverse=True)
        return ends[:limit]

    async def oldest_queued(self) -> datetime | None:
        self._check_open()
        found = [
            s.queued_at
            for s in self._tasks.values()
            if s.status is TaskStatus.QUEUED and s.owner is None and s.queued_at is not None
        ]
        return min(found, default=None)
