"""Activity: what ended lately and how old the queue's head is (optional; the dashboard's charts).

The records are :mod:`chongming.stores.activity`'s. A store without it
inherits defaults that raise ``NotImplementedError``; the dashboard then
shows no charts.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from chongming.stores.activity import TaskEnd

__all__ = ["ActivityStore"]


class ActivityStore(Protocol):
    """Two bounded reads over the tasks table for charts."""

    async def recent_ends(self, since: datetime, *, limit: int) -> list[TaskEnd]:
        """Terminal tasks that finished at or after ``since``, newest first, at most ``limit``."""
        raise NotImplementedError(f"{type(self).__name__} has no activity (recent_ends)")

    async def oldest_queued(self) -> datetime | None:
        """When the longest-waiting claimable task (queued, no owner) was queued, or ``None``."""
        raise NotImplementedError(f"{type(self).__name__} has no activity (oldest_queued)")
