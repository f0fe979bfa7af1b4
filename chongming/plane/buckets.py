"""The bucket report: who owns each bucket, what it holds, what nobody checks otherwise.

What a default fleet owns: a node started without ``owned_buckets`` owns
every bucket *as one of a shared pool*. Workers of one queue are such a pool:
their claims are atomic and every reconcile write is a compare-and-set, so
N of them over the same buckets is the intended layout, not a fault, and
the report does not flag it. A node given ``owned_buckets`` declares a
partition: its range is meant to be its own.

Three misconfigurations make no noise on their own, and the report names
them from the node rows and the task counts in the store:

- a bucket in the declared ranges of two live nodes (**owned twice**: the
  ranges were meant to partition the buckets, and both nodes accept submits
  into it and reconcile it; no task runs twice for it, since every claim
  and reconcile write compares, but the partition is not what was meant);
- a bucket holding unfinished tasks with no live owner (**orphaned**: they
  pile up silently);
- live nodes that disagree on ``num_buckets`` (**mismatched**: one key maps
  to different buckets on them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.nodes import NodeRecord, TaskCount, served_by_live_nodes, unserved_counts

if TYPE_CHECKING:
    from chongming.stores.base import TaskStore

__all__ = ["BucketReport", "BucketRow", "report_buckets", "unclaimed"]

#: How many unclaimed queued tasks the report reads to name what nobody serves.
UNCLAIMED_SAMPLE = 10_000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BucketRow:
    """One bucket: its live owners, and its tasks (all, and unfinished)."""

    bucket: int
    owners: tuple[str, ...]  # every live node owning it: declared ranges and the shared pool
    tasks: int
    active: int
    ranged: tuple[str, ...] = ()  # the live owners whose declared owned_buckets hold it

    @property
    def owned_twice(self) -> bool:
        """In the declared ranges of two live nodes (a partition that overlaps)."""
        return len(self.ranged) > 1

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
    #: Live nodes owning every bucket as a shared pool (no ``owned_buckets``).
    shared: tuple[str, ...] = ()
    #: Live nodes whose ``num_buckets`` differs from the report's, with theirs.
    mismatched: Mapping[str, int] = dataclasses.field(default_factory=dict)

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
    ranged: dict[int, list[str]] = {}
    shared: list[str] = []
    mismatched: dict[str, int] = {}
    for node in nodes:
        if not node.live:
            continue
        name = node.info.owner
        if node.info.num_buckets != num_buckets:
            mismatched[name] = node.info.num_buckets
        owned = node.info.owned_buckets
        if owned is None:
            shared.append(name)
        for bucket in range(num_buckets) if owned is None else owned:
            owners.setdefault(bucket, []).append(name)
            if owned is not None:
                ranged.setdefault(bucket, []).append(name)
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
            ranged=tuple(sorted(ranged.get(bucket, ()))),
        )
        for bucket in sorted(set(owners) | set(tasks))
    )
    return BucketReport(
        num_buckets=num_buckets,
        rows=rows,
        unbucketed_active=unbucketed,
        unserved=unserved_counts(waiting, served_by_live_nodes(nodes)),
        shared=tuple(sorted(shared)),
        mismatched=mismatched,
    )
