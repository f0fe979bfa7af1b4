"""The in-memory store's activity reads: the oracle the SQL backends are checked against."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.activity import EndCount, check_durations_limit, check_since, check_window
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.activity import ActivityStore

__all__ = ["ActivityOnMemory"]


class ActivityOnMemory(MemoryState, ActivityStore):
    """Scans the dict (a memory store is small by nature)."""

    def _ended_since(self, since: datetime) -> list[TaskSnapshot]:
        return [
            s
            for s in self._tasks.values()
            if s.status.is_terminal and s.finished_at is not None and s.finished_at >= since
        ]

    async def end_counts(self, since: datetime, *, minutes: int) -> list[EndCount]:
        self._check_open()
        since, minutes = check_window(since, minutes)
        until = since + timedelta(minutes=minutes)
        counted: Counter[tuple[int, TaskStatus]] = Counter()
        for s in self._ended_since(since):
            assert s.finished_at is not None
            if s.finished_at < until:
                minute = int((s.finished_at - since).total_seconds() // 60)
                counted[minute, s.status] += 1
        return [EndCount(minute=m, status=st, count=n) for (m, st), n in counted.items()]

    async def recent_durations(self, since: datetime, *, limit: int) -> list[float]:
        self._check_open()
        since, limit = check_since(since), check_durations_limit(limit)
        timed = [s for s in self._ended_since(since) if s.started_at is not None]
        timed.sort(key=lambda s: s.finished_at or since, reverse=True)
        took: list[float] = []
        for s in timed[:limit]:
            runs = [
                t.at
                for t in self._history.get(s.task_id, {}).values()
                if t.from_status is TaskStatus.STARTING and t.to_status is TaskStatus.RUNNING
            ]
            if runs and s.finished_at is not None:
                took.append(max(0.0, (s.finished_at - max(runs)).total_seconds()))
        return took

    async def oldest_queued(self) -> datetime | None:
        self._check_open()
        found = [
            s.queued_at
            for s in self._tasks.values()
            if s.status is TaskStatus.QUEUED and s.owner is None and s.queued_at is not None
        ]
        return min(found, default=None)
