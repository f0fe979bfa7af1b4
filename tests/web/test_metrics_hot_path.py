"""What the metrics' hot path reports: counts by label values, attempts timed from history.

An attempt's duration is read from the run's own history when it ends (its
``starting`` step to its end, on the clock the transitions are stamped
with), so a fake clock gives exact buckets, and attempts a worker's claim
started are timed too.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from chongming import Controller
from chongming.state.status import TaskStatus
from chongming.stores.memory import InMemoryTaskStore
from chongming.web.metrics import ChongmingMetrics


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now


def samples(metrics: ChongmingMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], metric: str, **labels: str) -> float:
    return found.get((metric, tuple(sorted(labels.items()))), 0.0)


async def test_an_attempt_is_timed_on_the_clock_its_transitions_are_stamped_with() -> None:
    clock = ManualClock()
    metrics = ChongmingMetrics()

    async def slow(ctx: object) -> int:
        clock.now += 2.0  # two seconds pass on the run's clock while it works
        return 1

    async with Controller(observers=[metrics], clock=clock) as controller:
        controller.register("slow", slow)
        await (await controller.submit("slow")).wait(timeout=10)
    found = samples(metrics)
    h = "chongming_attempt_duration_seconds"
    assert value(found, f"{h}_count", name="slow", outcome="succeeded") == 1
    assert value(found, f"{h}_sum", name="slow", outcome="succeeded") == 2.0
    assert value(found, f"{h}_bucket", name="slow", outcome="succeeded", le="1.0") == 0
    assert value(found, f"{h}_bucket", name="slow", outcome="succeeded", le="2.5") == 1
    t = "chongming_transitions_total"
    for source, target, trigger in (
        ("pending", "queued", "orchestrator:dependencies_resolved"),
        ("running", "succeeded", "executor:completed"),
    ):
        assert value(found, t, from_status=source, to_status=target, trigger=trigger) == 1


async def test_attempts_a_claim_started_are_timed_and_their_transitions_counted() -> None:
    metrics = ChongmingMetrics()
    store = InMemoryTaskStore()

    async def job(ctx: object) -> int:
        return 1

    worker = Controller(store=store, work=True, observers=[metrics], poll_interval=0.05)
    worker.register("job", job)
    async with worker:
        queued = [await worker.enqueue("job", task_id=f"j-{n}") for n in range(3)]
        finals = [await task.wait(timeout=10) for task in queued]
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 3
    found = samples(metrics)
    h = "chongming_attempt_duration_seconds_count"
    assert value(found, h, name="job", outcome="succeeded") == 3
    t = "chongming_transitions_total"
    succeeded = {"from_status": "running", "to_status": "succeeded"}
    assert value(found, t, **succeeded, trigger="executor:completed") == 3


class PlainRun:
    """A hosted run that is not a TaskRun: no compact history to read."""

    def __init__(self) -> None:
        self.task_id, self.name, self.status = "p-1", "plain", TaskStatus.PENDING

    @property
    def last_transition(self) -> Any:
        class Record:
            trigger = "custom:moved"

        return Record()


def test_a_run_that_is_not_a_task_run_is_counted_and_timed_as_it_moves() -> None:
    metrics = ChongmingMetrics()
    run = PlainRun()
    for previous, status in (
        (TaskStatus.PENDING, TaskStatus.QUEUED),
        (TaskStatus.QUEUED, TaskStatus.STARTING),
        (TaskStatus.STARTING, TaskStatus.FAILED),
    ):
        run.status = status
        metrics.transition(run, previous)
    assert metrics.transitions == {
        ("pending", "queued", "custom:moved"): 1,
        ("queued", "starting", "custom:moved"): 1,
        ("starting", "failed", "custom:moved"): 1,
    }
    assert metrics.attempt_seconds[("plain", "failed")].count == 1
