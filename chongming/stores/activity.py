"""What the dashboard's charts read: recent ends and the oldest claimable task (records, checks).

Both reads are bounded: :meth:`~chongming.stores.ports.activity.ActivityStore.recent_ends`
takes at most ``limit`` rows through the index of finished tasks (migration
``*_retention``), and ``oldest_queued`` reads one value of the claimable
index.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from chongming.errors import PayloadError
from chongming.state.status import TaskStatus

__all__ = ["MAX_ENDS", "TaskEnd", "check_ends"]

#: The most ends one ``recent_ends`` call may ask for.
MAX_ENDS = 100_000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskEnd:
    """One terminal task: how and when it ended, and when its last attempt started."""

    status: TaskStatus
    finished_at: datetime
    started_at: datetime | None


def check_ends(since: object, limit: object) -> tuple[datetime, int]:
    """The arguments of ``recent_ends``, refused alike by every backend."""
    if not isinstance(since, datetime) or since.tzinfo is None:
        raise PayloadError("since", "must be a timezone-aware datetime")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ENDS:
        raise PayloadError("limit", f"must be an integer from 1 to {MAX_ENDS}, got {limit!r}")
    return since, limit
