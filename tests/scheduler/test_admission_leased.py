"""AdmissionQueue with leased tags: the limit of a cluster-wide tag is the slots held now."""

from __future__ import annotations

import pytest

from chongming.errors import ConfigurationError
from chongming.scheduler import AdmissionLimits, AdmissionQueue


def drain(queue: AdmissionQueue[str]) -> list[str]:
    popped: list[str] = []
    while (item := queue.pop_ready()) is not None:
        popped.append(item)
    return popped


def test_a_leased_tag_admits_nothing_until_slots_are_held() -> None:
    queue: AdmissionQueue[str] = AdmissionQueue(AdmissionLimits(max_parallel=10), leased=["api"])
    queue.push("a1", tags=["api"])
    queue.push("plain")
    queue.push("a2", tags=["api"], priority=5)
    assert drain(queue) == ["plain"]  # the api items wait for slots; others pass them
    assert queue.demand("api") == (0, 2)
    queue.set_leased("api", 1)
    assert drain(queue) == ["a2"]  # priority order still holds among them
    assert queue.demand("api") == (1, 1)
    queue.release("a2")
    assert drain(queue) == ["a1"]  # the held slot is reused without a new lease
    assert queue.demand("api") == (1, 0)


def test_lowering_the_leased_slots_stops_nothing_and_blocks_new_admissions() -> None:
    queue: AdmissionQueue[str] = AdmissionQueue(AdmissionLimits(max_parallel=10), leased=["api"])
    queue.set_leased("api", 2)
    for item in ("a1", "a2", "a3"):
        queue.push(item, tags=["api"])
    assert drain(queue) == ["a1", "a2"]
    queue.set_leased("api", 1)
    queue.release("a1")
    assert drain(queue) == []  # one still runs and one slot is held: a3 waits
    queue.release("a2")
    assert drain(queue) == ["a3"]


def test_a_local_limit_on_a_leased_tag_caps_what_the_lease_admits() -> None:
    limits = AdmissionLimits(max_parallel=10, resource_limits={"api": 1})
    queue: AdmissionQueue[str] = AdmissionQueue(limits, leased=["api"])
    queue.push("a1", tags=["api"])
    queue.push("a2", tags=["api"])
    queue.set_leased("api", 5)
    assert drain(queue) == ["a1"]
    assert queue.demand("api") == (1, 1)


def test_discarded_items_leave_the_demand() -> None:
    queue: AdmissionQueue[str] = AdmissionQueue(AdmissionLimits(max_parallel=10), leased=["api"])
    queue.push("a1", tags=["api"])
    queue.push("a2", tags=["api"])
    assert queue.discard("a1")
    assert queue.demand("api") == (0, 1)
    assert queue.discard("a2")
    assert queue.demand("api") == (0, 0)


def test_only_leased_tags_take_leased_slots() -> None:
    queue: AdmissionQueue[str] = AdmissionQueue(AdmissionLimits(max_parallel=2))
    with pytest.raises(ConfigurationError, match="not leased"):
        queue.set_leased("api", 1)
