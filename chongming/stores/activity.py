"""What the dashboard's charts read: ends per minute, recent durations, the queue's head.

Every read is bounded in what it returns: ``end_counts`` one row per
(minute, status) of the window, ``recent_durations`` at most ``limit``
numbers, ``oldest_queued`` one value. The first two walk the index of
finished tasks (migration ``*_retention``) over the window only; the last
reads one end of the claimable index (migration ``*_queue``).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from chongming.errors import PayloadError
from chongming.state.status import TaskStatus

__all__ = [
    "MAX_DURATIONS",
    "MAX_MINUTES",
    "EndCount",
    "check_durations_limit",
    "check_since",
    "check_window",
]

#: The longest window ``end_counts`` takes (minutes) and the most durations one call reads.
MAX_MINUTES = 24 * 60
MAX_DURATIONS = 100_000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EndCount:
    """How many tasks ended with ``status`` in minute ``minute`` of the window (0: the first)."""

    minute: int
    status: TaskStatus
    count: int


def check_since(since: object) -> datetime:
    if not isinstance(since, datetime) or since.tzinfo is None:
        raise PayloadError("since", "must be a timezone-aware datetime")
    return since


def check_window(since: object, minutes: object) -> tuple[datetime, int]:
    """The arguments of ``end_counts``, refused alike by every backend."""
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
        raise PayloadError(
            "minutes", f"must be an integer from 1 to {MAX_MINUTES}, got {minutes!r}"
        )
    return check_since(since), minutes


def check_durations_limit(limit: object) -> int:
    """The ``limit`` of ``recent_durations``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_DURATIONS:
        raise PayloadError("limit", f"must be an integer from 1 to {MAX_DURATIONS}, got {limit!r}")
    return limit
