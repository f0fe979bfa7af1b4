"""The admission queue: which waiting item gets the next execution slot.

Pure bookkeeping (no asyncio, no clock): the controller pushes items, asks for
the next admissible one, and releases it when it ends.

**Order.** Higher priority first; FIFO within one priority (a sequence number
taken at push). An item is admissible when a global slot is free, its bucket
is under ``max_parallel_per_bucket`` and every limited tag it carries is under
its resource limit. ``pop_ready`` returns the first admissible item in that
order, exactly what a scan of the whole queue would pick, without the scan.

**Structure.** Waiting items are grouped in *classes* of equal constraints:
``(bucket, limited tags)``. All items of one class are admissible or blocked
together, so only a class's head (its best item) ever competes. Inside a class
each priority level is a FIFO list (see :mod:`chongming.scheduler.waiting`);
a global heap holds the heads of the classes not known to be blocked. When
the best head turns out to be blocked, its whole class is parked under the
bucket or resource that blocks it and leaves the global heap in one step,
however many items it holds; releasing a slot of that bucket or resource puts
the parked classes back. Removal is lazy: a discarded item is marked dead and
skipped when it reaches the front; a superseded global entry is recognised
because its class now schedules another sequence number.

**Unconstrained queues.** With no per-bucket limit and no resource limit
(the common case) every item falls in one class: it stays for the queue's
lifetime, outside the global heap, and an item pushed while nothing waits and
a slot is free can take that slot at once (:meth:`AdmissionQueue.admit`).

**Cost.** ``push``, ``discard`` and ``pop_ready`` are O(log c) amortised, c
being the number of classes (bounded by buckets × combinations of limited
tags, not by the queue length), plus O(log p) for the p distinct priorities
inside a class; a release that unparks k classes costs O(k log c).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Hashable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from chongming.errors import AdmissionStateError, ConfigurationError
from chongming.scheduler.limits import AdmissionLimits, AdmissionStatistics
from chongming.scheduler.waiting import Entry, WaitingClass

__all__ = ["AdmissionQueue"]

T = TypeVar("T", bound=Hashable)
K = TypeVar("K", int, str)

_NO_TAGS: frozenset[str] = frozenset()


class AdmissionQueue(Generic[T]):
    """Items waiting for an execution slot, and the slots they hold once admitted.

    Items are opaque hashable values (a task id, a run handle). An item is in
    at most one of two states: *waiting* (after ``push``) or *running* (after
    ``pop_ready`` returned it, until ``release``). Misuse of that protocol
    raises :class:`~chongming.errors.AdmissionStateError`.
    """

    def __init__(self, limits: AdmissionLimits, *, leased: Collection[str] = ()) -> None:
        if not isinstance(limits, AdmissionLimits):
            raise ConfigurationError(f"limits must be AdmissionLimits, got {type(limits).__name__}")
        self._limits = limits
        self._max_parallel = limits.max_parallel
        self._per_bucket = limits.max_parallel_per_bucket
        self._resource_limits = dict(limits.resource_limits)
        # Leased tags (cluster-wide limits): the limit is the slots held now, at
        # most the local limit of the tag if it has one; none until leased.
        self._local_caps = {tag: limits.resource_limits.get(tag) for tag in leased}
        for tag in leased:
            self._resource_limits[tag] = 0
        self._waiting_per_resource: dict[str, int] = {}
        self._seq = 0
        self._classes: dict[tuple[int | None, frozenset[str]], WaitingClass[T]] = {}
        self._ready: list[tuple[int, int, WaitingClass[T]]] = []
        self._waiting: dict[T, Entry[T]] = {}
        #: The waiting items (read-only to callers: its truth value says whether any wait).
        self.waiting: Mapping[T, Entry[T]] = self._waiting
        self._running: dict[T, Entry[T]] = {}
        self._waiting_per_bucket: dict[int, int] = {}
        self._running_per_bucket: dict[int, int] = {}
        self._running_per_resource: dict[str, int] = {}
        self._parked_by_bucket: dict[int, set[WaitingClass[T]]] = {}
        self._parked_by_resource: dict[str, set[WaitingClass[T]]] = {}
        # Unconstrained: the one class every item falls in (None otherwise).
        self._plain: WaitingClass[T] | None = None
        if self._per_bucket is None and not self._resource_limits and not leased:
            plain = self._plain = WaitingClass((None, _NO_TAGS))
            self._classes[plain.key] = plain
            self._plain_running: Entry[Any] = Entry(None, 0, -1, None, plain)
            self._plain_running.live = False

    def __len__(self) -> int:
        """Number of waiting items."""
        return len(self._waiting)

    @property
    def running(self) -> int:
        """Number of items holding a slot."""
        return len(self._running)

    @property
    def limits(self) -> AdmissionLimits:
        return self._limits

    def set_leased(self, tag: str, slots: int) -> None:
        """The slots of a leased tag held now; more admits the items it had blocked.

        Lowering it below the running count stops nothing: items wait until
        the running ones are under it again.
        """
        if tag not in self._local_caps:
            raise ConfigurationError(f"tag {tag!r} is not leased by this queue")
        cap = self._local_caps[tag]
        new = slots if cap is None else min(slots, cap)
        old = self._resource_limits[tag]
        self._resource_limits[tag] = new
        if new > old:
            parked = self._parked_by_resource.pop(tag, None)
            if parked is not None:
                self._unpark(parked)

    def demand(self, tag: str) -> tuple[int, int]:
        """``(running, waiting)`` items carrying a limited ``tag``."""
        return self._running_per_resource.get(tag, 0), self._waiting_per_resource.get(tag, 0)

    def push(
        self,
        item: T,
        *,
        priority: int = 0,
        bucket: int | None = None,
        tags: Collection[str] = (),
    ) -> None:
        """Queue ``item``; it waits until ``pop_ready`` admits it or ``discard`` removes it."""
        self._check_new(item, priority, bucket)
        plain = self._plain
        if plain is not None:
            if tags:
                self._limited(tags)  # still refuse what is not a collection of strings
            owner = plain
        else:
            limited = self._limited(tags) if tags else _NO_TAGS
            key = (bucket if self._per_bucket is not None else None, limited)
            found = self._classes.get(key)
            if found is None:
                found = self._classes[key] = WaitingClass(key)
            owner = found
        seq = self._seq
        self._seq = seq + 1
        entry = Entry(item, -priority, seq, bucket, owner)
        owner.add(entry)
        self._waiting[item] = entry
        for tag in owner.resources:
            self._waiting_per_resource[tag] = self._waiting_per_resource.get(tag, 0) + 1
        if bucket is not None:
            self._waiting_per_bucket[bucket] = self._waiting_per_bucket.get(bucket, 0) + 1
        if plain is None and owner.blocked_on is None:
            self._schedule(owner)

    def admit(
        self,
        item: T,
        *,
        priority: int = 0,
        bucket: int | None = None,
        tags: Collection[str] = (),
    ) -> bool:
        """``push`` then ``pop_ready``, as one step when that is what they would do.

        True: ``item`` holds its slot now (it was the next admissible item).
        False: it waits, exactly as after ``push``; call ``pop_ready`` as usual.
        """
        plain = self._plain
        if plain is None or self._waiting or len(self._running) >= self._max_parallel:
            self.push(item, priority=priority, bucket=bucket, tags=tags)
            return False
        # Nothing waits and a slot is free: the new item is the one pop_ready returns.
        if (
            item in self._running
            or type(priority) is not int
            or (bucket is not None and (type(bucket) is not int or bucket < 0))
        ):
            self._check_new(item, priority, bucket)  # raises what is wrong (or lets it be)
        if tags:
            self._limited(tags)
        self._seq += 1
        if bucket is None:
            # release reads a running entry's bucket and class only: one shared entry will do.
            self._running[item] = self._plain_running
            return True
        entry = Entry(item, -priority, self._seq - 1, bucket, plain)
        entry.live = False
        self._running[item] = entry
        self._running_per_bucket[bucket] = self._running_per_bucket.get(bucket, 0) + 1
        return True

    def _check_new(self, item: T, priority: int, bucket: int | None) -> None:
        if item in self._waiting:
            raise AdmissionStateError(item, "already waiting", "neither waiting nor running")
        if item in self._running:
            raise AdmissionStateError(item, "running", "neither waiting nor running")
        if type(priority) is not int and (
            isinstance(priority, bool) or not isinstance(priority, int)
        ):
            raise ConfigurationError(f"priority must be an integer, got {priority!r}")
        if bucket is not None and (
            isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 0
        ):
            raise ConfigurationError(f"bucket must be a non-negative integer, got {bucket!r}")

    def discard(self, item: T) -> bool:
        """Remove a waiting item (stopped while queued, start timeout).

        Returns False when ``item`` is not waiting (unknown, or already running).
        """
        entry = self._waiting.pop(item, None)
        if entry is None:
            return False
        self._leave_waiting(entry)
        owner = entry.owner
        if owner.size == 0:
            if owner is self._plain:
                owner.clear()
            else:
                self._drop(owner)
            return True
        owner.forget()  # lazy deletion, compacted so dead entries cannot pile up
        if owner.blocked_on is None and owner.scheduled == entry.seq:
            self._schedule(owner)
        return True

    def pop_ready(self) -> T | None:
        """Admit the next item: it now holds its slots until ``release``.

        Returns None when nothing waiting is admissible right now.
        """
        if len(self._running) >= self._max_parallel:
            return None
        plain = self._plain
        if plain is not None:
            if plain.size == 0:
                return None
            entry = plain.take_head()
            del self._waiting[entry.item]
            self._leave_waiting(entry)
            if plain.size == 0:
                plain.clear()  # dead entries behind the head go too
            self._take_slots(entry)
            return entry.item
        ready = self._ready
        while ready:
            _, seq, owner = ready[0]
            if owner.scheduled != seq:
                heapq.heappop(ready)  # superseded: the class has a new head or left
                continue
            blocker = self._blocker(owner)
            heapq.heappop(ready)
            owner.scheduled = None
            if blocker is not None:
                self._park(owner, blocker)
                continue
            entry = owner.take_head()
            del self._waiting[entry.item]
            self._leave_waiting(entry)
            self._take_slots(entry)
            if owner.size == 0:
                self._drop(owner)
            else:
                self._schedule(owner)
            return entry.item
        return None

    def release(self, item: T) -> None:
        """Free the slots of a running item that ended (or left for a retry wait)."""
        entry = self._running.pop(item, None)
        if entry is None:
            actual = "waiting" if item in self._waiting else "unknown"
            raise AdmissionStateError(item, actual, "running")
        bucket = entry.bucket
        if bucket is not None:
            count = self._running_per_bucket[bucket] - 1
            if count:
                self._running_per_bucket[bucket] = count
            else:
                del self._running_per_bucket[bucket]
            parked = self._parked_by_bucket.pop(bucket, None)
            if parked is not None:
                self._unpark(parked)
        if self._plain is not None:
            return  # no resource limits: nothing parked, nothing counted per tag
        for tag in entry.owner.resources:
            count = self._running_per_resource[tag] - 1
            if count:
                self._running_per_resource[tag] = count
            else:
                del self._running_per_resource[tag]
            parked = self._parked_by_resource.pop(tag, None)
            if parked is not None:
                self._unpark(parked)

    def statistics(self) -> AdmissionStatistics:
        """A frozen snapshot of the counts, for ``stats()`` and dashboards."""
        return AdmissionStatistics(
            running=len(self._running),
            waiting=len(self._waiting),
            running_per_bucket=MappingProxyType(dict(self._running_per_bucket)),
            waiting_per_bucket=MappingProxyType(dict(self._waiting_per_bucket)),
            running_per_resource=MappingProxyType(dict(self._running_per_resource)),
            limits=self._limits,
        )

    def _limited(self, tags: Collection[str]) -> frozenset[str]:
        if isinstance(tags, str):
            # A bare "io" would otherwise be read as the tags {"i", "o"}.
            raise ConfigurationError(f"tags must be a collection of strings, got {tags!r}")
        for tag in tags:
            if not isinstance(tag, str):
                raise ConfigurationError(f"tags must be strings, got {tag!r}")
        if not self._resource_limits:
            return _NO_TAGS
        return frozenset(tag for tag in tags if tag in self._resource_limits)

    def _leave_waiting(self, entry: Entry[T]) -> None:
        entry.live = False
        entry.owner.size -= 1
        for tag in entry.owner.resources:
            count = self._waiting_per_resource[tag] - 1
            if count:
                self._waiting_per_resource[tag] = count
            else:
                del self._waiting_per_resource[tag]
        bucket = entry.bucket
        if bucket is not None:
            count = self._waiting_per_bucket[bucket] - 1
            if count:
                self._waiting_per_bucket[bucket] = count
            else:
                del self._waiting_per_bucket[bucket]

    def _take_slots(self, entry: Entry[T]) -> None:
        self._running[entry.item] = entry
        bucket = entry.bucket
        if bucket is not None:
            self._running_per_bucket[bucket] = self._running_per_bucket.get(bucket, 0) + 1
        if self._plain is not None:
            return
        for tag in entry.owner.resources:
            self._running_per_resource[tag] = self._running_per_resource.get(tag, 0) + 1

    def _schedule(self, owner: WaitingClass[T]) -> None:
        """Make the global heap hold this (unparked, non-empty) class's current head."""
        head = owner.head()
        if owner.scheduled != head.seq:
            owner.scheduled = head.seq
            heapq.heappush(self._ready, (head.neg_priority, head.seq, owner))
            if len(self._ready) > 2 * len(self._classes) + 64:
                self._compact_ready()

    def _blocker(self, owner: WaitingClass[T]) -> int | str | None:
        """The full bucket (an int) or resource tag (a str) that blocks ``owner``."""
        bucket = owner.bucket
        if (
            bucket is not None
            and self._per_bucket is not None
            and self._running_per_bucket.get(bucket, 0) >= self._per_bucket
        ):
            return bucket
        for tag in owner.resources:
            if self._running_per_resource.get(tag, 0) >= self._resource_limits[tag]:
                return tag
        return None

    def _park(self, owner: WaitingClass[T], blocker: int | str) -> None:
        owner.blocked_on = blocker
        if isinstance(blocker, int):
            self._parked_by_bucket.setdefault(blocker, set()).add(owner)
        else:
            self._parked_by_resource.setdefault(blocker, set()).add(owner)

    def _unpark(self, parked: set[WaitingClass[T]]) -> None:
        # A class may still be blocked by another limit; the next pop_ready
        # finds that out and parks it there, once.
        for owner in parked:
            owner.blocked_on = None
            self._schedule(owner)

    def _compact_ready(self) -> None:
        """Rebuild the global heap without superseded entries (amortised O(1))."""
        # In place: pop_ready holds a reference to this list.
        self._ready[:] = [
            (head.neg_priority, head.seq, owner)
            for owner in self._classes.values()
            if owner.scheduled is not None
            for head in (owner.head(),)
        ]
        heapq.heapify(self._ready)

    def _drop(self, owner: WaitingClass[T]) -> None:
        """Forget an empty class so the class table does not grow without bound."""
        owner.levels.clear()
        owner.priorities.clear()
        owner.scheduled = None
        blocked_on = owner.blocked_on
        if blocked_on is not None:
            owner.blocked_on = None
            if isinstance(blocked_on, int):
                self._unpark_one(self._parked_by_bucket, blocked_on, owner)
            else:
                self._unpark_one(self._parked_by_resource, blocked_on, owner)
        if self._classes.get(owner.key) is owner:
            del self._classes[owner.key]

    @staticmethod
    def _unpark_one(table: dict[K, set[WaitingClass[T]]], key: K, owner: WaitingClass[T]) -> None:
        parked = table.get(key)
        if parked is not None:
            parked.discard(owner)
            if not parked:
                del table[key]
