"""Enqueue N tasks, then drain them with a worker; beside pgqueuer in the same run.

    python benchmarks/bench_queue.py [--n 10000] [--no-postgres]

Full audit trail on: every task goes queued -> starting -> running ->
succeeded in the store. A client controller enqueues N trivial tasks
(``--chunk`` concurrent enqueues at a time); then one worker
(``Controller(work=True, max_parallel=...)``, in this process) drains them.
The drain rate counts from the worker's start to the moment the store holds
no unfinished task. pgqueuer 1.6 (benchmark-only dependency) enqueues and
drains the same N on the same PostgreSQL server, one consumer, batch 32.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_control import DSN, drop, pgqueuer_drain

from chongming import Controller, SqliteTaskStore
from chongming.stores.base import TaskStore


async def trivial(ctx: Any) -> int:
    return 1


async def enqueue_and_drain(
    make_store: Any, n: int, chunk: int, max_parallel: int
) -> tuple[float, float]:
    """(enqueues per second, drained tasks per second)."""
    client_store: TaskStore = make_store()
    async with Controller(store=client_store, owner="client") as client:
        started = time.perf_counter()
        for first in range(0, n, chunk):
            await asyncio.gather(
                *(client.enqueue("trivial") for _ in range(first, min(n, first + chunk)))
            )
        enqueue_rate = n / (time.perf_counter() - started)
        worker_store = make_store(client_store)
        worker = Controller(
            store=worker_store,
            owner="worker",
            work=True,
            max_parallel=max_parallel,
            keep_finished=100,
            poll_interval=0.05,
        )
        worker.register("trivial", trivial)
        started = time.perf_counter()
        async with worker:
            while True:
                counts = await client_store.task_counts(active_only=True)
                if sum(count.count for count in counts) == 0:
                    break
                await asyncio.sleep(0.02)
            drain_rate = n / (time.perf_counter() - started)
        await worker_store.close()
    await drop(client_store)
    await client_store.close()
    return enqueue_rate, drain_rate


async def drain_with_processes(
    make_store: Any, options: list[str], n: int, chunk: int, workers: int
) -> float:
    """Enqueue ``n`` (not timed), then drain with ``workers`` ``chongming worker`` processes."""
    import os
    import signal
    import subprocess

    client_store: TaskStore = make_store()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))
    async with Controller(store=client_store, owner="client") as client:
        for first in range(0, n, chunk):
            await asyncio.gather(
                *(client.enqueue("trivial") for _ in range(first, min(n, first + chunk)))
            )
        started = time.perf_counter()
        serve = ["worker", "--tasks", "bench_queue_tasks", "--max-parallel", "500"]
        processes = [
            subprocess.Popen(  # noqa: ASYNC220 - a benchmark, timed around the drain only
                [sys.executable, "-m", "chongming", *options, "--owner", f"bench-{k}", *serve],
                stdout=subprocess.DEVNULL,
                env=env,
            )
            for k in range(workers)
        ]
        try:
            while sum(c.count for c in await client_store.task_counts(active_only=True)):
                await asyncio.sleep(0.02)
            rate = n / (time.perf_counter() - started)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=60)
    await drop(client_store)
    await client_store.close()
    return rate


async def start_latency(make_store: Any, samples: int) -> tuple[float, float]:
    """Enqueue -> ``started_at`` on an idle worker (p50, p99 in ms); it polls once a second."""
    import statistics
    from datetime import UTC, datetime

    client_store: TaskStore = make_store()
    worker_store = make_store(client_store)
    worker = Controller(store=worker_store, owner="idle", work=True, poll_interval=1.0)
    worker.register("trivial", trivial)
    delays = []
    async with Controller(store=client_store, owner="client") as client, worker:
        await asyncio.sleep(0.5)
        for _ in range(samples):
            sent = datetime.now(UTC)
            queued = await client.enqueue("trivial")
            final = await queued.wait(timeout=30)
            assert final.started_at is not None
            delays.append((final.started_at - sent).total_seconds() * 1000)
    await worker_store.close()
    await drop(client_store)
    await client_store.close()
    delays.sort()
    return statistics.median(delays), delays[int(len(delays) * 0.99) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--max-parallel", type=int, default=500)
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args()
    n = options.n
    print(f"enqueue then drain {n:,} trivial tasks, one worker, full audit trail:")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "queue.db"

        def sqlite(_: object = None) -> TaskStore:
            return SqliteTaskStore(path)

        enq, drain = asyncio.run(enqueue_and_drain(sqlite, n, options.chunk, options.max_parallel))
        print(f"  SQLite      enqueue {enq:>8,.0f}/s   drain {drain:>8,.0f}/s")
        path.unlink()
        rate = asyncio.run(
            drain_with_processes(sqlite, ["--db", str(path)], n, options.chunk, workers=2)
        )
        print(f"  SQLite      drain with 2 worker processes {rate:>8,.0f}/s (start included)")
    if options.no_postgres:
        return 0
    schema = "bench_q_" + secrets.token_hex(4)

    def postgres(_: object = None) -> TaskStore:
        from chongming.stores.postgres import PostgresTaskStore

        return PostgresTaskStore(DSN, schema=schema)

    enq, drain = asyncio.run(enqueue_and_drain(postgres, n, options.chunk, options.max_parallel))
    print(f"  PostgreSQL  enqueue {enq:>8,.0f}/s   drain {drain:>8,.0f}/s")
    pg_options = ["--db", DSN, "--schema", schema]
    for workers in (1, 2):
        rate = asyncio.run(drain_with_processes(postgres, pg_options, n, options.chunk, workers))
        label = f"drain with {workers} worker process{'es' if workers > 1 else ''}"
        print(f"  PostgreSQL  {label} {rate:>8,.0f}/s (start included)")
    p50, p99 = asyncio.run(start_latency(postgres, 100))
    print(f"  PostgreSQL  enqueue -> start on an idle worker: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    pgq_drain, pgq_overall = asyncio.run(pgqueuer_drain(n))
    print(f"  pgqueuer    drain {pgq_drain:>8,.0f}/s ({pgq_overall:,.0f}/s counting its enqueue)")
    print(f"ratio: PostgreSQL drain {drain / pgq_drain:.2f}x pgqueuer (goal >= 1.0, aim 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
