"""The waiting side of the admission queue: entries, priority FIFOs, classes.

Internal to :mod:`chongming.scheduler.admission`; kept apart so each module
holds one concept. A *class* groups the waiting items that share a bucket and
a set of limited tags: they are admissible or blocked together.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Entry", "PriorityFifo", "WaitingClass"]

T = TypeVar("T", bound=Hashable)


class WaitingClass(Generic[T]):
    """Waiting items that share a bucket and a set of limited tags.

    Items are kept in one FIFO per priority level, with a small heap of the
    levels: a push appends and a pop takes from the front, so the cost does
    not depend on how many items wait (only on how many distinct priorities
    the class holds). Discarded entries stay in place, marked dead, until they
    reach the front or a compaction drops them.
    """

    __slots__ = (
        "blocked_on",
        "bucket",
        "dead",
        "key",
        "levels",
        "priorities",
        "resources",
        "scheduled",
        "size",
    )

    def __init__(self, key: tuple[int | None, frozenset[str]]) -> None:
        self.key = key
        self.bucket, self.resources = key
        self.levels: dict[int, PriorityFifo[T]] = {}  # by negated priority
        self.priorities: list[int] = []  # heap of the keys of ``levels``
        self.size = 0  # live entries
        self.dead = 0  # discards since the last compaction
        # The sequence number of this class's entry in the global heap, or
        # None when it has none (empty, or parked as blocked).
        self.scheduled: int | None = None
        # While parked: the full bucket (an int) or resource tag (a str).
        self.blocked_on: int | str | None = None

    def add(self, entry: Entry[T]) -> None:
        level = self.levels.get(entry.neg_priority)
        if level is None:
            level = self.levels[entry.neg_priority] = PriorityFifo()
            heapq.heappush(self.priorities, entry.neg_priority)
        level.entries.append(entry)  # sequence numbers grow: the FIFO stays sorted
        self.size += 1

    def head(self) -> Entry[T]:
        """The best live entry (highest priority, then oldest); the class is not empty."""
        levels, priorities = self.levels, self.priorities
        while True:
            level = levels[priorities[0]]
            entries = level.entries
            for index in range(level.start, len(entries)):
                entry = entries[index]
                if entry.live:
                    level.start = index
                    return entry
            del levels[heapq.heappop(priorities)]

    def take_head(self) -> Entry[T]:
        """Remove and return the head (the caller marks it no longer waiting)."""
        entry = self.head()
        level = self.levels[self.priorities[0]]
        start = level.start + 1
        entries = level.entries
        if start == len(entries):
            del self.levels[heapq.heappop(self.priorities)]
        elif start >= 64 and 2 * start >= len(entries):
            del entries[:start]  # drop the consumed prefix, amortised O(1)
            start = 0
        level.start = start
        return entry

    def clear(self) -> None:
        """Drop every entry (the class holds no live one)."""
        self.levels.clear()
        self.priorities.clear()
        self.dead = 0

    def forget(self) -> None:
        """Record a discard; compact once dead entries outnumber live ones."""
        self.dead += 1
        if self.dead > self.size + 64:
            for key, level in list(self.levels.items()):
                level.entries = [e for e in level.entries[level.start :] if e.live]
                level.start = 0
                if not level.entries:
                    del self.levels[key]
            self.priorities = list(self.levels)
            heapq.heapify(self.priorities)
            self.dead = 0


class PriorityFifo(Generic[T]):
    """A FIFO of one priority: a list and the index of its first unconsumed entry."""

    __slots__ = ("entries", "start")

    def __init__(self) -> None:
        self.entries: list[Entry[T]] = []
        self.start = 0


class Entry(Generic[T]):
    """One pushed item; ``live`` turns False once it leaves the waiting set."""

    __slots__ = ("bucket", "item", "live", "neg_priority", "owner", "seq")

    def __init__(
        self, item: T, neg_priority: int, seq: int, bucket: int | None, owner: WaitingClass[T]
    ) -> None:
        self.item = item
        self.neg_priority = neg_priority
        self.seq = seq
        self.bucket = bucket
        self.owner = owner
        self.live = True
