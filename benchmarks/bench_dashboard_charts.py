"""The charts page and a durable task's journal over a big store, against the list in one run.

    python benchmarks/bench_dashboard_charts.py [--tasks 100000] [--requests 100]

A SQLite store with ``--tasks`` tasks is filled through ``apply_writes``:
nine in ten finished at times spread evenly over the last ``--hours`` (2:
45,000 of them fall in the charts' hour; 24: about 3,750), the rest queued
and claimable. Each finished task has a ``starting -> running`` in its
history (the durations read it). One durable task carries ``--steps`` steps
of 4 KiB results. Each page is requested ``--requests`` times in process
(httpx over ASGI) and its server time recorded: p50 and p99, and the p50 as
a ratio to the list's first page (the baseline, measured in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.durable import StepRecord
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.writes import StateWrite
from chongming.web import create_app

FINISHED = (TaskStatus.SUCCEEDED, TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.LOST)


def write(i: int, now: datetime, total: int, hours: float) -> StateWrite:
    finished = i % 10 != 0
    at = now - timedelta(hours=hours) + timedelta(seconds=hours * 3600 * i / total)
    status = FINISHED[i % len(FINISHED)] if finished else TaskStatus.QUEUED
    task = TaskSnapshot(
        task_id=f"task-{i:07d}",
        name=("sync", "report", "mail")[i % 3],
        label=f"job {i}",
        status=status,
        status_version=1,
        attempt=1 if finished else 0,
        max_attempts=1,
        created_at=at - timedelta(seconds=5),
        updated_at=at,
        bucket=i % 64,
        owner="node-1" if finished else None,
        queued_at=at - timedelta(seconds=5),
        started_at=at - timedelta(seconds=(i % 50) / 10) if finished else None,
        finished_at=at if finished else None,
    )
    first = Transition(
        task_id=task.task_id,
        version=1,
        from_status=TaskStatus.PENDING,
        to_status=status,
        at=at,
        trigger="bench:seed",
    )
    if not finished:
        return StateWrite(snapshot=task, transitions=(first,))
    ran = Transition(
        task_id=task.task_id,
        version=2,
        from_status=TaskStatus.STARTING,
        to_status=TaskStatus.RUNNING,
        at=task.started_at or at,
        trigger="executor:launched",
        attempt=1,
    )
    return StateWrite(snapshot=task, transitions=(first, ran))


async def fill(path: str, total: int, steps: int, hours: float = 2.0) -> None:
    now = datetime.now(UTC)
    async with SqliteTaskStore(path) as store:
        batch: list[StateWrite] = []
        for i in range(total):
            batch.append(write(i, now, total, hours))
            if len(batch) == 1000:
                await store.apply_writes(batch)
                batch = []
        if batch:
            await store.apply_writes(batch)
        durable = TaskSnapshot(
            task_id="durable-1",
            name="import",
            label="a long journal",
            status=TaskStatus.STARTING,
            status_version=1,
            attempt=1,
            max_attempts=1,
            created_at=now,
            updated_at=now,
            owner="node-1",
        )
        await store.create(durable)
        running, move = _running(durable, now)
        await store.save(running, expect_version=1, transitions=[move])
        epoch = await store.begin_durable_attempt("durable-1", "node-1", max_resumes=3)
        for n in range(steps):
            step = StepRecord(name=f"page-{n}", occurrence=0, ok=True, value="x" * 4096)
            await store.record_step("durable-1", epoch, step)


def _running(snapshot: TaskSnapshot, now: datetime) -> tuple[TaskSnapshot, Transition]:
    from chongming.state.machine import apply_transition

    return apply_transition(snapshot, TaskStatus.RUNNING, trigger="executor:launched", at=now)


async def time_pages(path: str, requests: int) -> dict[str, tuple[float, float]]:
    app = create_app(path)
    pages = {
        "/ (baseline: the list)": "/",
        "/charts": "/charts",
        "/fragments/charts (live poll)": "/fragments/charts",
        "/tasks/durable-1 (journal)": "/tasks/durable-1",
        "/?label= (a scan: 1 match)": "/?status=all&label=job+99999",
        "/?label= (50 matches early)": "/?status=all&label=job+1",
        "/?key= (by its index)": "/?status=all&key=order-1",
        "/?from=&to= (the creation index)": "/?status=all&from=2000-01-01T00:00",
    }
    results: dict[str, tuple[float, float]] = {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for label, url in pages.items():
            for _ in range(5):
                assert (await client.get(url)).status_code == 200, url
            times = []
            for _ in range(requests):
                started = time.perf_counter()
                response = await client.get(url)
                times.append(time.perf_counter() - started)
                assert response.status_code == 200
            times.sort()
            results[label] = (statistics.median(times), times[int(len(times) * 0.99) - 1])
    await app.aclose()
    return results


async def main(options: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "tasks.db")
        started = time.perf_counter()
        await fill(path, options.tasks, options.steps, options.hours)
        print(f"filled {options.tasks:,} tasks in {time.perf_counter() - started:.1f}s")
        results = await time_pages(path, options.requests)
    base = results["/ (baseline: the list)"][0]
    for label, (p50, p99) in results.items():
        print(
            f"  {label:32} p50 {p50 * 1000:6.1f} ms   p99 {p99 * 1000:6.1f} ms"
            f"   ratio {p50 / base:5.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--hours", type=float, default=2.0, help="the ends spread over these")
    asyncio.run(main(parser.parse_args()))
