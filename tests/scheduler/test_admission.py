"""AdmissionQueue: each limit, order, discard, release, and the seed's demos."""

from __future__ import annotations

from typing import Any

import pytest

from chongming.errors import AdmissionStateError, ConfigurationError
from chongming.scheduler import AdmissionLimits, AdmissionQueue, BucketPolicy


def drain(queue: AdmissionQueue[str]) -> list[str]:
    """Pop until nothing is admissible."""
    popped: list[str] = []
    while (item := queue.pop_ready()) is not None:
        popped.append(item)
    return popped


def make(**limits: Any) -> AdmissionQueue[str]:
    return AdmissionQueue(AdmissionLimits(**limits))


# -- limits validation ---------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, 1.0, "2", True, None])
def test_max_parallel_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_parallel must be a positive integer"):
        AdmissionLimits(max_parallel=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -3, 2.5, False])
def test_max_parallel_per_bucket_must_be_positive(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_parallel_per_bucket"):
        AdmissionLimits(max_parallel=2, max_parallel_per_bucket=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("resources", "problem"),
    [
        ({"io": 0}, r"resource_limits\['io'\] must be a positive integer"),
        ({"io": -1}, "positive integer"),
        ({"io": 1.5}, "positive integer"),
        ({"io": True}, "positive integer"),
        ({1: 2}, "keys must be non-empty tag strings"),
        ({"": 2}, "keys must be non-empty tag strings"),
        ([("io", 2)], "must be a mapping"),
    ],
)
def test_resource_limits_are_validated(resources: Any, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        AdmissionLimits(max_parallel=2, resource_limits=resources)


def test_resource_limits_are_copied_and_read_only() -> None:
    source = {"io": 2}
    limits = AdmissionLimits(max_parallel=4, resource_limits=source)
    source["io"] = 99
    assert limits.resource_limits == {"io": 2}
    with pytest.raises(TypeError):
        limits.resource_limits["io"] = 5  # type: ignore[index]


def test_queue_needs_limits_object() -> None:
    with pytest.raises(ConfigurationError, match="AdmissionLimits"):
        AdmissionQueue({"max_parallel": 2})  # type: ignore[arg-type]


# -- push arguments and protocol misuse ---------------------------------------


def test_push_rejects_bad_arguments() -> None:
    queue = make(max_parallel=2)
    with pytest.raises(ConfigurationError, match="priority"):
        queue.push("a", priority=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="bucket"):
        queue.push("a", bucket=-1)
    with pytest.raises(ConfigurationError, match="bucket"):
        queue.push("a", bucket="7")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="collection of strings"):
        queue.push("a", tags="io")
    with pytest.raises(ConfigurationError, match="tags must be strings"):
        queue.push("a", tags=[1])  # type: ignore[list-item]
    assert len(queue) == 0
    assert queue.statistics().waiting_per_bucket == {}


def test_push_twice_and_release_unknown_are_errors() -> None:
    queue = make(max_parallel=1)
    queue.push("a")
    with pytest.raises(AdmissionStateError, match="already waiting"):
        queue.push("a")
    assert queue.pop_ready() == "a"
    with pytest.raises(AdmissionStateError, match="is running"):
        queue.push("a")
    queue.push("b")
    with pytest.raises(AdmissionStateError, match="'b' is waiting") as caught:
        queue.release("b")
    assert isinstance(caught.value, LookupError)
    with pytest.raises(AdmissionStateError, match="'zzz' is unknown"):
        queue.release("zzz")
    queue.release("a")
    with pytest.raises(AdmissionStateError):
        queue.release("a")


def test_released_item_can_be_pushed_again() -> None:
    """A retry re-enters admission with the same item."""
    queue = make(max_parallel=1)
    queue.push("a")
    assert queue.pop_ready() == "a"
    queue.release("a")
    queue.push("a")
    assert queue.pop_ready() == "a"


# -- global limit, order ------------------------------------------------------


def test_seed_queueing_demo_two_run_two_wait() -> None:
    queue = make(max_parallel=2)
    for task_id in ("t0", "t1", "t2", "t3"):
        queue.push(task_id)
    assert drain(queue) == ["t0", "t1"]
    assert (queue.running, len(queue)) == (2, 2)
    queue.release("t0")
    assert drain(queue) == ["t2"]
    assert (queue.running, len(queue)) == (2, 1)


def test_priority_then_fifo() -> None:
    queue = make(max_parallel=10)
    queue.push("low-1", priority=-1)
    queue.push("mid-1")
    queue.push("high-1", priority=5)
    queue.push("mid-2")
    queue.push("high-2", priority=5)
    queue.push("low-2", priority=-1)
    assert drain(queue) == ["high-1", "high-2", "mid-1", "mid-2", "low-1", "low-2"]


def test_fifo_across_classes_of_equal_priority() -> None:
    queue = make(max_parallel=10, max_parallel_per_bucket=5, resource_limits={"io": 5})
    queue.push("a", bucket=1)
    queue.push("b", bucket=2, tags={"io"})
    queue.push("c")
    queue.push("d", bucket=1, tags={"io"})
    queue.push("e", bucket=2)
    assert drain(queue) == ["a", "b", "c", "d", "e"]


def test_nothing_runs_when_global_limit_is_full() -> None:
    queue = make(max_parallel=1)
    queue.push("a")
    queue.push("b", priority=100)
    assert queue.pop_ready() == "b"
    assert queue.pop_ready() is None
    queue.release("b")
    assert queue.pop_ready() == "a"


def test_empty_queue_pops_none() -> None:
    assert make(max_parallel=3).pop_ready() is None


# -- per-bucket limit ----------------------------------------------------------


def test_seed_bucket_demo_backlog_of_a_does_not_block_b() -> None:
    policy = BucketPolicy(64)
    bucket_a, bucket_b = policy.bucket_for("tenant-A"), policy.bucket_for("tenant-B")
    assert (bucket_a, bucket_b) == (7, 28)
    queue = make(max_parallel=10, max_parallel_per_bucket=1)
    for index in range(4):
        queue.push(f"a{index}", bucket=bucket_a)
    for index in range(2):
        queue.push(f"b{index}", bucket=bucket_b)
    assert drain(queue) == ["a0", "b0"]
    stats = queue.statistics()
    assert stats.running_per_bucket == {7: 1, 28: 1}
    assert stats.waiting_per_bucket == {7: 3, 28: 1}
    queue.release("a0")
    queue.release("b0")
    assert drain(queue) == ["a1", "b1"]
    assert queue.statistics().waiting_per_bucket == {7: 2}


def test_items_without_bucket_ignore_the_bucket_limit() -> None:
    queue = make(max_parallel=10, max_parallel_per_bucket=1)
    for index in range(3):
        queue.push(f"n{index}")
    assert drain(queue) == ["n0", "n1", "n2"]


def test_buckets_unbounded_without_per_bucket_limit() -> None:
    queue = make(max_parallel=10)
    for index in range(3):
        queue.push(f"a{index}", bucket=7)
    assert drain(queue) == ["a0", "a1", "a2"]
    assert queue.statistics().running_per_bucket == {7: 3}


def test_blocked_high_priority_bucket_does_not_block_lower_priority() -> None:
    queue = make(max_parallel=10, max_parallel_per_bucket=1)
    queue.push("hot-0", bucket=1, priority=9)
    queue.push("hot-1", bucket=1, priority=9)
    queue.push("cold", bucket=2)
    assert drain(queue) == ["hot-0", "cold"]
    queue.release("hot-0")
    assert drain(queue) == ["hot-1"]


# -- resource limits -------------------------------------------------------------


def test_resource_limit_by_tag() -> None:
    queue = make(max_parallel=10, resource_limits={"io": 2})
    for index in range(4):
        queue.push(f"io{index}", tags={"io"})
    queue.push("cpu", tags={"cpu"})  # unlimited tag: ignored
    queue.push("plain")
    assert drain(queue) == ["io0", "io1", "cpu", "plain"]
    assert queue.statistics().running_per_resource == {"io": 2}
    queue.release("io1")
    assert drain(queue) == ["io2"]


def test_item_needs_a_slot_in_every_limited_tag() -> None:
    queue = make(max_parallel=10, resource_limits={"io": 2, "gpu": 1})
    queue.push("gpu-only", tags={"gpu"})
    queue.push("both", tags=["io", "gpu"])
    queue.push("io-only", tags=("io",))
    assert drain(queue) == ["gpu-only", "io-only"]
    assert queue.statistics().running_per_resource == {"gpu": 1, "io": 1}
    queue.release("io-only")
    assert drain(queue) == []  # io is free but gpu is not
    queue.release("gpu-only")
    assert drain(queue) == ["both"]
    assert queue.statistics().running_per_resource == {"gpu": 1, "io": 1}


def test_release_reenables_class_blocked_on_bucket_then_resource() -> None:
    queue = make(max_parallel=10, max_parallel_per_bucket=1, resource_limits={"io": 1})
    queue.push("holder-bucket", bucket=3)
    queue.push("holder-io", tags={"io"})
    queue.push("x", bucket=3, tags={"io"})
    assert drain(queue) == ["holder-bucket", "holder-io"]
    queue.release("holder-bucket")  # bucket frees; io still full
    assert drain(queue) == []
    queue.release("holder-io")
    assert drain(queue) == ["x"]


def test_paused_item_keeps_slot_until_released() -> None:
    """The queue knows nothing of pause: a slot is held until release()."""
    queue = make(max_parallel=1)
    queue.push("paused")
    queue.push("next")
    assert queue.pop_ready() == "paused"
    assert queue.pop_ready() is None


# -- discard -----------------------------------------------------------------------


def test_discard_waiting_item() -> None:
    queue = make(max_parallel=10)
    for name in "abc":
        queue.push(name)
    assert queue.discard("a") is True
    assert queue.discard("a") is False
    assert queue.discard("never") is False
    assert len(queue) == 2
    assert drain(queue) == ["b", "c"]
    assert queue.discard("b") is False  # running, not waiting
    assert queue.running == 2


def test_discard_head_of_parked_class_then_unpark() -> None:
    queue = make(max_parallel=10, max_parallel_per_bucket=1)
    queue.push("run", bucket=1)
    queue.push("w1", bucket=1)
    queue.push("w2", bucket=1)
    assert drain(queue) == ["run"]  # parks bucket 1's class
    assert queue.discard("w1") is True
    queue.release("run")
    assert drain(queue) == ["w2"]


def test_discard_every_item_of_parked_class() -> None:
    queue = make(max_parallel=10, max_parallel_per_bucket=1)
    queue.push("run", bucket=1)
    queue.push("w1", bucket=1)
    assert drain(queue) == ["run"]
    assert queue.discard("w1") is True
    queue.release("run")
    assert drain(queue) == []
    queue.push("w3", bucket=1)
    assert drain(queue) == ["w3"]


def test_many_discards_do_not_keep_dead_entries() -> None:
    queue = make(max_parallel=1)
    for index in range(5000):
        queue.push(f"i{index}")
    for index in range(1, 5000):
        queue.discard(f"i{index}")
    assert len(queue) == 1
    # White-box: lazy deletion compacts, so memory follows the live items.
    stored = sum(
        len(level.entries) - level.start
        for owner in queue._classes.values()
        for level in owner.levels.values()
    )
    assert stored < 200
    assert drain(queue) == ["i0"]


def test_order_survives_compaction_across_priority_levels() -> None:
    queue = make(max_parallel=10_000)
    for index in range(3000):
        queue.push(f"i{index}", priority=index % 7)
    kept = [f"i{index}" for index in range(3000) if index % 10 == 3]
    for index in range(3000):
        if index % 10 != 3:
            assert queue.discard(f"i{index}")
    expected = sorted(kept, key=lambda name: (-(int(name[1:]) % 7), int(name[1:])))
    assert drain(queue) == expected


def test_long_fifo_consumed_from_the_front() -> None:
    queue: AdmissionQueue[int] = AdmissionQueue(AdmissionLimits(max_parallel=1))
    for index in range(1000):
        queue.push(index)
    for index in range(1000):
        assert queue.pop_ready() == index
        queue.release(index)
    assert len(queue) == 0


# -- statistics and the no-scan property ------------------------------------------


def test_statistics_is_frozen_snapshot() -> None:
    limits = AdmissionLimits(max_parallel=3, resource_limits={"io": 1})
    queue: AdmissionQueue[str] = AdmissionQueue(limits)
    queue.push("a", bucket=4, tags={"io"})
    queue.push("b", bucket=4, tags={"io"})
    assert queue.pop_ready() == "a"
    stats = queue.statistics()
    assert (stats.running, stats.waiting) == (1, 1)
    assert stats.running_per_bucket == {4: 1}
    assert stats.waiting_per_bucket == {4: 1}
    assert stats.running_per_resource == {"io": 1}
    assert stats.limits is limits
    queue.release("a")
    assert stats.running == 1  # unchanged: a snapshot, not a view
    assert stats.running_per_bucket == {4: 1}
    assert queue.limits is limits


class _CountingQueue(AdmissionQueue[str]):
    checks = 0

    def _blocker(self, owner: Any) -> int | str | None:
        type(self).checks += 1
        return super()._blocker(owner)


def test_blocked_backlog_is_skipped_without_scanning_it() -> None:
    queue = _CountingQueue(AdmissionLimits(max_parallel=100, max_parallel_per_bucket=1))
    queue.push("holder", bucket=1, priority=10)
    for index in range(10_000):
        queue.push(f"backlog-{index}", bucket=1, priority=10)
    queue.push("other", bucket=2)
    _CountingQueue.checks = 0
    assert drain(queue) == ["holder", "other"]
    # holder, the parked backlog class once, other, and nothing else.
    assert _CountingQueue.checks <= 3
    _CountingQueue.checks = 0
    for _ in range(100):
        assert queue.pop_ready() is None
    assert _CountingQueue.checks == 0
