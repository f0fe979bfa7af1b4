"""A worker's own metrics, parsed with prometheus_client's parser: claims, starts, ends, slots."""

from __future__ import annotations

import asyncio
from importlib.metadata import version as installed_version
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from chongming import Controller, TaskStatus
from chongming.stores.memory import InMemoryTaskStore
from chongming.web.worker_metrics import WorkerMetrics


def samples(metrics: WorkerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], metric: str, **labels: str) -> float:
    return found[(metric, tuple(sorted(labels.items())))]


async def test_a_worker_counts_what_it_claimed_started_and_ended() -> None:
    store = InMemoryTaskStore()
    release = asyncio.Event()

    async def job(ctx: Any, n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        if n == 99:
            await release.wait()
        return n

    metrics = WorkerMetrics(owner="w-1", max_parallel=3)
    worker = Controller(
        store=store,
        owner="w-1",
        work=True,
        max_parallel=3,
        poll_interval=0.02,
        observers=metrics.observers(),
    )
    worker.register("job", job)
    async with Controller(store=store, owner="client") as client, worker:
        done = [await client.enqueue("job", n, task_id=f"j-{n}") for n in (1, 2, -1)]
        for task in done:
            await task.wait(timeout=10)
        held = await client.enqueue("job", 99, task_id="j-99")
        while (await held.get()).status is not TaskStatus.RUNNING:
            await asyncio.sleep(0.01)
        found = samples(metrics)
        assert value(found, "chongming_worker_claims_total") == 4
        assert value(found, "chongming_worker_starts_total") == 4
        assert value(found, "chongming_worker_ends_total", status="succeeded") == 2
        assert value(found, "chongming_worker_ends_total", status="failed") == 1
        assert value(found, "chongming_worker_ends_total", status="lost") == 0
        assert value(found, "chongming_worker_slots_used") == 1
        assert value(found, "chongming_worker_slots_free") == 2
        assert value(found, "chongming_worker_max_parallel") == 3
        assert value(found, "chongming_worker_parks_total") == 0
        version = installed_version("chongming")
        assert value(found, "chongming_worker_info", owner="w-1", version=version) == 1
        # the dashboard observer's families, reused: attempts, writes, renewals
        h = "chongming_attempt_duration_seconds_count"
        assert value(found, h, name="job", outcome="succeeded") == 2
        assert value(found, h, name="job", outcome="failed") == 1
        assert value(found, "chongming_store_write_seconds_count") >= 1
        assert ("chongming_lease_renewals_total", ()) in found
        assert ("chongming_reconcile_outcomes_total", ()) not in found  # labelled, none yet
        release.set()
        await held.wait(timeout=10)
    # a worker's exposition never carries the store-wide gauges: every worker would repeat them
    names = {name for name, _ in samples(metrics)}
    assert not any(name.startswith("chongming_store_tasks") for name in names)
    assert not any(name.startswith("chongming_store_queue_depth") for name in names)


async def test_a_durable_task_parked_here_is_counted_and_frees_its_slot() -> None:
    store = InMemoryTaskStore()

    async def napper(ctx: Any) -> str:
        await ctx.sleep("nap", 3600)
        return "woke"

    metrics = WorkerMetrics(owner="w-p", max_parallel=2)
    worker = Controller(
        store=store,
        owner="w-p",
        work=True,
        max_parallel=2,
        poll_interval=0.02,
        park_threshold=1.0,
        observers=metrics.observers(),
    )
    worker.register("napper", napper, durable=True)
    async with Controller(store=store, owner="client") as client, worker:
        task = await client.enqueue("napper", task_id="nap-1")
        while value(samples(metrics), "chongming_worker_parks_total") < 1:
            await asyncio.sleep(0.01)
        while (stored := await task.get()).status is not TaskStatus.QUEUED:
            await asyncio.sleep(0.01)  # the write-through makes the park durable
        assert stored.owner is None
        while value(samples(metrics), "chongming_worker_slots_used") != 0:
            await asyncio.sleep(0.01)  # the host lets go once the park is durable
        found = samples(metrics)
        assert value(found, "chongming_worker_slots_free") == 2
        assert value(found, "chongming_worker_claims_total") == 1
        assert value(found, "chongming_worker_ends_total", status="succeeded") == 0
