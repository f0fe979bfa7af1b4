"""Activity: ends per minute, recent attempt durations, the queue's head (optional; for charts).

The records are :mod:`chongming.stores.activity`'s. A store without it
inherits defaults that raise ``NotImplementedError``; the dashboard then
shows no charts.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from chongming.stores.activity import EndCount

__all__ = ["ActivityStore"]


class ActivityStore(Protocol):
    """Three reads over the tasks table whose answers are bounded, whatever the store holds."""

    async def end_counts(self, since: datetime, *, minutes: int) -> list[EndCount]:
        """Terminal tasks that finished in ``[since, since + minutes)``, by minute and status.

        Minute *k* holds the ends in ``[since + k min, since + (k+1) min)``; a
        (minute, status) with no end has no row. At most ``minutes`` x the
        terminal statuses rows, in no set order.
        """
        raise NotImplementedError(f"{type(self).__name__} has no activity (end_counts)")

    async def recent_durations(self, since: datetime, *, limit: int) -> list[float]:
        """How long the last run of each of the newest ``limit`` ends since ``since`` took.

        Seconds from the task's last ``starting -> running`` transition to its
        ``finished_at``: the attempt that ended it (or, for a durable task that
        parked or resumed, its last run). Newest first; tasks that ended
        without running (cancelled, skipped) are left out.
        """
        raise NotImplementedError(f"{type(self).__name__} has no activity (recent_durations)")

    async def oldest_queued(self) -> datetime | None:
        """When the longest-waiting claimable task (queued, no owner) was queued, or ``None``."""
        raise NotImplementedError(f"{type(self).__name__} has no activity (oldest_queued)")
