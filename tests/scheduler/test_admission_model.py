"""AdmissionQueue against a brute-force reference that scans the whole queue.

Hypothesis drives random push / discard / pop / release sequences under
random limits; after every step the queue must have made the same choice as
the scan, never exceeded a limit, and never left an admissible item waiting
after it answered "nothing ready".
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from chongming.scheduler import AdmissionLimits, AdmissionQueue
from tests.tiers import examples

TAGS = ("io", "gpu", "net")  # "net" is never limited: it must not matter


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Waiting:
    item: int
    priority: int
    seq: int
    bucket: int | None
    tags: frozenset[str]


class Reference:
    """The obvious O(n log n) implementation, trusted because it is obvious."""

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self.waiting: dict[int, Waiting] = {}
        self.running: dict[int, Waiting] = {}
        self.seq = 0

    def push(self, item: int, priority: int, bucket: int | None, tags: frozenset[str]) -> None:
        self.waiting[item] = Waiting(
            item=item, priority=priority, seq=self.seq, bucket=bucket, tags=tags
        )
        self.seq += 1

    def admissible(self, entry: Waiting) -> bool:
        limits = self.limits
        if len(self.running) >= limits.max_parallel:
            return False
        if entry.bucket is not None and limits.max_parallel_per_bucket is not None:
            in_bucket = sum(1 for r in self.running.values() if r.bucket == entry.bucket)
            if in_bucket >= limits.max_parallel_per_bucket:
                return False
        for tag in entry.tags:
            if tag in limits.resource_limits:
                using = sum(1 for r in self.running.values() if tag in r.tags)
                if using >= limits.resource_limits[tag]:
                    return False
        return True

    def choose(self) -> int | None:
        for entry in sorted(self.waiting.values(), key=lambda e: (-e.priority, e.seq)):
            if self.admissible(entry):
                return entry.item
        return None

    def admit(self, item: int) -> None:
        self.running[item] = self.waiting.pop(item)


limits_strategy = st.builds(
    AdmissionLimits,
    max_parallel=st.integers(1, 5),
    max_parallel_per_bucket=st.none() | st.integers(1, 3),
    resource_limits=st.dictionaries(st.sampled_from(TAGS[:2]), st.integers(1, 3)),
)


class AdmissionMachine(RuleBasedStateMachine):
    queue: AdmissionQueue[int]
    reference: Reference

    def __init__(self) -> None:
        super().__init__()
        self.next_item = 0
        self.last_pop_was_none = False

    @initialize(limits=limits_strategy)
    def start(self, limits: AdmissionLimits) -> None:
        self.queue = AdmissionQueue(limits)
        self.reference = Reference(limits)

    @rule(
        priority=st.integers(-2, 2),
        bucket=st.none() | st.integers(0, 3),
        tags=st.frozensets(st.sampled_from(TAGS), max_size=3),
        count=st.integers(1, 4),
    )
    def push(self, priority: int, bucket: int | None, tags: frozenset[str], count: int) -> None:
        for _ in range(count):
            item = self.next_item
            self.next_item += 1
            self.queue.push(item, priority=priority, bucket=bucket, tags=tags)
            self.reference.push(item, priority, bucket, tags)
        self.last_pop_was_none = False

    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        known = sorted(self.reference.waiting) + sorted(self.reference.running) + [-1]
        item = data.draw(st.sampled_from(known))
        expected = item in self.reference.waiting
        assert self.queue.discard(item) is expected
        if expected:
            del self.reference.waiting[item]

    @rule(times=st.integers(1, 3))
    def pop(self, times: int) -> None:
        for _ in range(times):
            expected = self.reference.choose()
            got = self.queue.pop_ready()
            assert got == expected
            if got is None:
                self.last_pop_was_none = True
                return
            self.reference.admit(got)

    @precondition(lambda self: bool(self.reference.running))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.reference.running)))
        self.queue.release(item)
        del self.reference.running[item]
        self.last_pop_was_none = False

    @invariant()
    def counts_match(self) -> None:
        if not hasattr(self, "queue"):
            return
        stats = self.queue.statistics()
        running = self.reference.running.values()
        waiting = self.reference.waiting.values()
        assert len(self.queue) == stats.waiting == len(self.reference.waiting)
        assert self.queue.running == stats.running == len(self.reference.running)
        buckets = Counter(r.bucket for r in running if r.bucket is not None)
        assert dict(stats.running_per_bucket) == dict(buckets)
        waiting_buckets = Counter(w.bucket for w in waiting if w.bucket is not None)
        assert dict(stats.waiting_per_bucket) == dict(waiting_buckets)
        limited = self.reference.limits.resource_limits
        resources = Counter(tag for r in running for tag in r.tags if tag in limited)
        assert dict(stats.running_per_resource) == dict(resources)

    @invariant()
    def limits_hold(self) -> None:
        if not hasattr(self, "queue"):
            return
        stats = self.queue.statistics()
        limits = stats.limits
        assert stats.running <= limits.max_parallel
        if limits.max_parallel_per_bucket is not None:
            assert all(
                n <= limits.max_parallel_per_bucket for n in stats.running_per_bucket.values()
            )
        for tag, count in stats.running_per_resource.items():
            assert count <= limits.resource_limits[tag]

    @invariant()
    def nothing_admissible_left_after_none(self) -> None:
        if self.last_pop_was_none:
            assert not any(self.reference.admissible(w) for w in self.reference.waiting.values())


TestAdmissionAgainstReference = AdmissionMachine.TestCase
TestAdmissionAgainstReference.settings = settings(
    max_examples=examples(300), stateful_step_count=60, deadline=None
)
