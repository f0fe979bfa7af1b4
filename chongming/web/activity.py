"""What the charts page shows: the last hour's ends by minute and status, the queue, durations.

Four reads, each bounded in what it returns: ``end_counts`` (one row per
minute and status of the hour), ``recent_durations`` (the newest
:data:`DURATIONS_LIMIT`), ``oldest_queued`` (one value) and the per-status
counts the list already reads (cached by the app). A duration is the
last run of an end: from its last ``starting -> running`` to its
``finished_at`` (the attempt that ended it; earlier, retried attempts are
not counted).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from chongming.state.status import TaskStatus
from chongming.stores.activity import EndCount

if TYPE_CHECKING:
    from chongming.stores.base import TaskStore

__all__ = [
    "DURATIONS_LIMIT",
    "MINUTES",
    "PERCENTILES",
    "ActivityView",
    "build_activity",
    "percentile",
    "read_activity",
]

#: The window of the charts (minutes), and how many of its newest ends give the durations.
MINUTES = 60
DURATIONS_LIMIT = 1_000
#: The percentiles of attempt durations the page draws.
PERCENTILES = (50, 90, 99)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ActivityView:
    """The charts' data; ``available`` False: the store has no activity reads."""

    available: bool
    now: datetime
    #: ends per minute, oldest minute first, each {status value: count}
    per_minute: Sequence[Mapping[str, int]] = ()
    ends: int = 0
    counts: Mapping[str, int] = dataclasses.field(default_factory=dict)
    oldest_queued: datetime | None = None
    durations: Mapping[int, float] = dataclasses.field(default_factory=dict)  # pct -> seconds
    timed: int = 0  # how many durations the percentiles are of (the newest ends with a start)

    @property
    def queued(self) -> int:
        return self.counts.get(TaskStatus.QUEUED.value, 0)

    @property
    def oldest_age(self) -> float | None:
        """Seconds the longest-waiting claimable task has waited, by the store's clock."""
        if self.oldest_queued is None:
            return None
        return max(0.0, (self.now - self.oldest_queued).total_seconds())


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The nearest-rank percentile of already sorted values (an empty sample: 0)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def build_activity(
    counted: Sequence[EndCount],
    durations: Sequence[float],
    *,
    now: datetime,
    counts: Mapping[str, int],
    oldest_queued: datetime | None,
) -> ActivityView:
    """``counted``: ``end_counts`` over the hour before ``now``; ``durations`` any order."""
    minutes: list[dict[str, int]] = [{} for _ in range(MINUTES)]
    for row in counted:
        if 0 <= row.minute < MINUTES:
            bucket = minutes[row.minute]
            bucket[row.status.value] = bucket.get(row.status.value, 0) + row.count
    ordered = sorted(durations)
    return ActivityView(
        available=True,
        now=now,
        per_minute=minutes,
        ends=sum(row.count for row in counted if 0 <= row.minute < MINUTES),
        counts=dict(counts),
        oldest_queued=oldest_queued,
        durations={pct: percentile(ordered, pct) for pct in PERCENTILES},
        timed=len(ordered),
    )


async def read_activity(store: TaskStore | None, counts: Mapping[str, int]) -> ActivityView:
    """The hour before the store's clock says now; ``counts``: the caller's per-status counts."""
    if store is None:
        return ActivityView(available=False, now=datetime.now().astimezone())
    now = await store.store_time()
    # The minute boundaries fall on whole minutes of the store's clock: the bars stay put.
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = end - timedelta(minutes=MINUTES)
    try:
        counted = await store.end_counts(since, minutes=MINUTES)
        durations = await store.recent_durations(since, limit=DURATIONS_LIMIT)
        oldest = await store.oldest_queued()
    except NotImplementedError:
        return ActivityView(available=False, now=now, counts=dict(counts))
    return build_activity(counted, durations, now=now, counts=counts, oldest_queued=oldest)
