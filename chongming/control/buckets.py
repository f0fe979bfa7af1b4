"""The bucket report: who owns each bucket, what it holds, what nobody checks otherwise.

Two misconfigurations make no noise on their own: a bucket owned by two live
nodes (its tasks may run twice: both accept submits into it and both
reconcile it) and a bucket holding unfinished tasks with no live owner (they
pile up silently). The report names both, from the node rows and the task
counts in the store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.nodes import NodeRecord, TaskCount, served_by_live_nodes, unserved_counts

__all__ = ["BucketReport", "BucketRow", "report_buckets", "unclaimed"]

#: How many unclaimed queued tasks the report reads to name what nobody serves.
UNCLAIMED_SAMPLE = 10_000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BucketRow:
    """One bucket: its live owners, and its tasks (all, and unfinished)."""

    bucket: int
    owners: tuple[str, ...]
    tasks: int
    active: int

    @property
    def owned_twice(self) -> bool:
        return len(self.owners) > 1

    @property
    def orphaned(self) -> bool:
        """Unfinished tasks and no live owner: nobody will run or reconcile them."""
        return self.active > 0 and not self.owners


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BucketReport:
    num_buckets: int
    rows: tuple[BucketRow, ...]
    unbucketed_active: int = 0  # unfinished tasks submitted without a bucket key
    #: ``name@N`` -> queued tasks no live worker serves (they wait, visibly).
    unserved: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def owned_twice(self) -> list[BucketRow]:
        return [row for row in self.rows if row.owned_twice]

    @property
    def orphaned(self) -> list[BucketRow]:
        return [row for row in self.rows if row.orphaned]


async def unclaimed(store: TaskStore, counts: Iterable[TaskCount]) -> list[TaskSnapshot]:
    """Queued tasks nobody holds (up to :data:`UNCLAIMED_SAMPLE`); no read when counts say none."""
    if not any(c.status is TaskStatus.QUEUED and c.owner is None for c in counts):
        return []
    query = TaskQuery(statuses=frozenset({TaskStatus.QUEUED}), limit=UNCLAIMED_SAMPLE)
    return [snapshot for snapshot in await store.query(query) if snapshot.owner is None]


def report_buckets(
    nodes: Iterable[NodeRecord],
    counts: Iterable[TaskCount],
    *,
    num_buckets: int,
    waiting: Iterable[TaskSnapshot] = (),
) -> BucketReport:
    """Rows for every bucket that has a live owner or any task (others are empty).

    ``waiting``: queued tasks nobody holds, to name what no live worker serves.
    """
    nodes = list(nodes)
    owners: dict[int, list[str]] = {}
    for node in nodes:
        if not node.live:
            continue
        owned = node.info.owned_buckets
        for bucket in range(num_buckets) if owned is None else owned:
            owners.setdefault(bucket, []).append(node.info.owner)
    tasks: dict[int, int] = {}
    active: dict[int, int] = {}
    unbucketed = 0
    for count in counts:
        if count.bucket is None:
            if not count.status.is_terminal:
                unbucketed += count.count
            continue
        tasks[count.bucket] = tasks.get(count.bucket, 0) + count.count
        if not count.status.is_terminal:
            active[count.bucket] = active.get(count.bucket, 0) + count.count
    rows = tuple(
        BucketRow(
            bucket=bucket,
            owners=tuple(sorted(owners.get(bucket, ()))),
            tasks=tasks.get(bucket, 0),
            active=active.get(bucket, 0),
        )
        for bucket in sorted(set(owners) | set(tasks))
    )
    return BucketReport(
        num_buckets=num_buckets,
        rows=rows,
        unbucketed_active=unbucketed,
        unserved=unserved_counts(waiting, served_by_live_nodes(nodes)),
    )
