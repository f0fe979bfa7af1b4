"""The dashboard's server time over a big store, and what metrics + tracing cost the controller.

    python benchmarks/bench_dashboard.py [--tasks 100000] [--requests 200] [--n 50000]

1. **Pages.** A SQLite store with ``--tasks`` tasks (every status, 64
   buckets, two tags, three names, 200 unfinished) is filled through
   ``apply_writes``; then each page is requested ``--requests`` times in
   process (httpx over ASGI, no network), and the server time of each
   request is recorded: p50 and p99 per page (the list's per-status counts
   are reused for 2 s; two more rows read them on every request).
2. **Overhead.** The ``bench_controller.py`` workload (``--n`` trivial
   ``async def`` tasks through ``Controller(max_parallel=1000)``) without
   observers, with :class:`ChongmingMetrics`, with metrics + tracing on the
   OpenTelemetry API alone (no SDK: no-op spans), and with metrics + tracing
   on the SDK (a ``TracerProvider`` whose spans go nowhere, sampled and
   built), in the same process, best of ``--rounds``; the ratio to the run
   without observers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from chongming.controller import Controller
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.writes import StateWrite
from chongming.web import app as web_app
from chongming.web import create_app
from chongming.web.metrics import ChongmingMetrics
from chongming.web.tracing import ChongmingTracing

FINISHED = (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.STOPPED, TaskStatus.LOST)
UNFINISHED = (TaskStatus.QUEUED, TaskStatus.RUNNING, TaskStatus.PAUSED)
PARALLEL = 1000


def snapshot(i: int, start: datetime, unfinished: int, total: int) -> StateWrite:
    status = UNFINISHED[i % 3] if i >= total - unfinished else FINISHED[i % len(FINISHED)]
    at = start + timedelta(milliseconds=i)
    task = TaskSnapshot(
        task_id=f"task-{i:07d}",
        name=("sync", "report", "mail")[i % 3],
        label=f"job {i}",
        status=status,
        status_version=1,
        attempt=0 if status is TaskStatus.QUEUED else 1,
        max_attempts=1,
        created_at=at,
        updated_at=at,
        bucket=i % 64,
        tags=frozenset({("etl", "io")[i % 2]}),
        owner=None if status is TaskStatus.QUEUED else f"node-{i % 4}",
        finished_at=at if status.is_terminal else None,
    )
    first = Transition(
        task_id=task.task_id,
        version=1,
        from_status=TaskStatus.PENDING,
        to_status=status,
        at=at,
        trigger="bench:seed",
    )
    return StateWrite(snapshot=task, transitions=(first,))


async def fill(path: str, total: int, unfinished: int) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    store = SqliteTaskStore(path)
    async with store:
        batch: list[StateWrite] = []
        for i in range(total):
            batch.append(snapshot(i, start, unfinished, total))
            if len(batch) == 1000:
                await store.apply_writes(batch)
                batch = []
        if batch:
            await store.apply_writes(batch)


async def time_pages(path: str, requests: int) -> dict[str, tuple[float, float]]:
    app = create_app(path)
    ttl = web_app.COUNTS_TTL
    pages = {
        "/ (unfinished, page 1)": "/",
        "/?status=all (page 1)": "/?status=all",
        "/?status=all&page=20": "/?status=all&page=20",
        "/?status=failed": "/?status=failed",
        "/?name=report&tag=io": "/?status=all&name=report&tag=io",
        "/fragments/tasks (live poll)": "/fragments/tasks",
        "/tasks/{id}": "/tasks/task-0000500",
        "/metrics": "/metrics",
        "/nodes": "/nodes",
    }
    results: dict[str, tuple[float, float]] = {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for label, url in pages.items():
            for _ in range(5):  # warm the page cache and the connections
                assert (await client.get(url)).status_code == 200, url
            times = []
            for _ in range(requests):
                started = time.perf_counter()
                response = await client.get(url)
                times.append(time.perf_counter() - started)
                assert response.status_code == 200
            times.sort()
            results[label] = (statistics.median(times), times[int(len(times) * 0.99) - 1])
    # The list reuses its per-status counts for COUNTS_TTL seconds; without that
    # every request reads them afresh (what one request in every 2 s pays).
    web_app.COUNTS_TTL = 0.0
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for label, url in (
            ("/ (counts read afresh)", "/"),
            ("/?status=all (counts afresh)", "/?status=all"),
        ):
            times = []
            for _ in range(requests):
                started = time.perf_counter()
                assert (await client.get(url)).status_code == 200
                times.append(time.perf_counter() - started)
            times.sort()
            results[label] = (statistics.median(times), times[int(len(times) * 0.99) - 1])
    web_app.COUNTS_TTL = ttl
    await app.aclose()
    return results


async def trivial(ctx: object) -> int:
    return 1


async def through_controller(n: int, observers: list[Any] | None) -> float:
    async with Controller(max_parallel=PARALLEL, keep_finished=n, observers=observers) as c:
        c.register("trivial", trivial)
        started = time.perf_counter()
        for _ in range(n):
            await c.submit("trivial")
        outcomes = await c.wait_all()
        elapsed = time.perf_counter() - started
    assert all(outcome.ok for outcome in outcomes)
    return n / elapsed


async def overhead(n: int, rounds: int) -> dict[str, float]:
    from opentelemetry.sdk.trace import TracerProvider

    variants: dict[str, Any] = {
        "no observers": lambda: None,
        "metrics": lambda: [ChongmingMetrics()],
        "metrics + tracing (API only, no SDK)": lambda: [ChongmingMetrics(), ChongmingTracing()],
        "metrics + tracing (SDK, no exporter)": lambda: [
            ChongmingMetrics(),
            ChongmingTracing(TracerProvider()),
        ],
    }
    best = dict.fromkeys(variants, 0.0)
    for _ in range(rounds):
        for label, make in variants.items():  # interleaved: drift hits every variant alike
            gc.collect()
            best[label] = max(best[label], await through_controller(n, make()))
    return best


async def main(options: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "tasks.db")
        started = time.perf_counter()
        await fill(path, options.tasks, options.unfinished)
        print(f"filled {options.tasks:,} tasks in {time.perf_counter() - started:.1f}s")
        for label, (p50, p99) in (await time_pages(path, options.requests)).items():
            print(f"  {label:32} p50 {p50 * 1000:6.1f} ms   p99 {p99 * 1000:6.1f} ms")
    best = await overhead(options.n, options.rounds)
    base = best["no observers"]
    print(f"controller, {options.n:,} trivial async tasks, best of {options.rounds}:")
    for label, rate in best.items():
        print(f"  {label:40} {rate:9,.0f} tasks/s   ratio {rate / base:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--unfinished", type=int, default=200)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
