"""Enqueue N tasks, then drain them with workers; beside pgqueuer in the same run.

    python benchmarks/bench_queue.py [--n 10000] [--no-postgres] [--no-sqlite]

Full audit trail on: every task goes queued -> starting -> running ->
succeeded in the store, each transition with its history row. A client
controller enqueues N trivial tasks (``--chunk`` concurrent enqueues at a
time, timed); then a worker drains them: one in this process
(``Controller(work=True, max_parallel=...)``), then 1 and 2 ``chongming
worker`` processes (their start-up counted in the drain). A drain counts from
the worker's start to the moment the store holds no unfinished task; that is
probed every 20 ms with one cheap query (``EXISTS`` on the status index for
PostgreSQL), so the probe does not load the server it measures.

pgqueuer 1.6 (benchmark-only dependency, ``pip install -e '.[bench]'``)
enqueues the same N on the same PostgreSQL server (batches of 1,000, one
statement each) and drains it with one consumer, batch 32 (its documented
``QueueManager.run(batch_size=...)``), in this process like the in-process
worker. The ratio compares the two in-process drains.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_control import DSN, drop, pgqueuer_drain

from chongming import Controller, SqliteTaskStore
from chongming.state.status import ACTIVE_STATUSES
from chongming.stores.base import TaskStore

MakeStore = Callable[..., TaskStore]
_ACTIVE = sorted(status.value for status in ACTIVE_STATUSES)


async def trivial(ctx: Any) -> int:
    return 1


class Probe:
    """Is anything unfinished? One indexed EXISTS on PostgreSQL, the counts on SQLite."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._conn: Any = None

    async def unfinished(self) -> bool:
        schema = getattr(self._store, "schema", None)
        if schema is None:
            counts = await self._store.task_counts(active_only=True)
            return sum(count.count for count in counts) > 0
        if self._conn is None:
            import asyncpg

            self._conn = await asyncpg.connect(DSN)
        found: bool = await self._conn.fetchval(
            f"SELECT EXISTS (SELECT 1 FROM {schema}.tasks WHERE status = ANY($1::text[]))",
            _ACTIVE,
        )
        return found

    async def wait_drained(self) -> None:
        while await self.unfinished():
            await asyncio.sleep(0.02)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


async def enqueue_all(client: Controller, n: int, chunk: int) -> float:
    """Enqueues per second: ``chunk`` concurrent enqueues at a time."""
    started = time.perf_counter()
    for first in range(0, n, chunk):
        await asyncio.gather(
            *(client.enqueue("trivial") for _ in range(first, min(n, first + chunk)))
        )
    return n / (time.perf_counter() - started)


async def enqueue_and_drain(
    make_store: MakeStore, n: int, chunk: int, max_parallel: int
) -> tuple[float, float, float]:
    """(enqueues/s, drained tasks/s, CPU µs per task in this process while draining)."""
    client_store = make_store()
    probe = Probe(client_store)
    async with Controller(store=client_store, owner="client") as client:
        enqueue_rate = await enqueue_all(client, n, chunk)
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
        cpu = time.process_time()
        started = time.perf_counter()
        async with worker:
            await probe.wait_drained()
            drain_rate = n / (time.perf_counter() - started)
            cpu = time.process_time() - cpu
        await worker_store.close()
    await probe.close()
    await drop(client_store)
    await client_store.close()
    return enqueue_rate, drain_rate, cpu / n * 1e6


async def drain_with_processes(
    make_store: MakeStore, options: list[str], n: int, chunk: int, workers: int
) -> tuple[float, float]:
    """(enqueues/s, drained tasks/s) with ``workers`` ``chongming worker`` processes."""
    client_store = make_store()
    probe = Probe(client_store)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))
    async with Controller(store=client_store, owner="client") as client:
        enqueue_rate = await enqueue_all(client, n, chunk)
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
            await probe.wait_drained()
            rate = n / (time.perf_counter() - started)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=60)
    await probe.close()
    await drop(client_store)
    await client_store.close()
    return enqueue_rate, rate


async def start_latency(make_store: MakeStore, samples: int) -> tuple[float, float]:
    """Enqueue -> ``started_at`` on an idle worker (p50, p99 in ms); it polls once a second."""
    client_store = make_store()
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
    parser.add_argument("--no-sqlite", action="store_true")
    options = parser.parse_args()
    n, chunk = options.n, options.chunk
    print(f"enqueue {n:,} trivial tasks ({chunk} at a time), then drain, full audit trail:")
    if not options.no_sqlite:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "queue.db"

            def sqlite(_: object = None) -> TaskStore:
                return SqliteTaskStore(path)

            enq, drain, cpu = asyncio.run(enqueue_and_drain(sqlite, n, chunk, options.max_parallel))
            print(
                f"  SQLite      in-process worker: enqueue {enq:>7,.0f}/s  drain {drain:>7,.0f}/s"
                f"  ({cpu:,.0f} µs CPU/task here)"
            )
            path.unlink()
            enq, rate = asyncio.run(
                drain_with_processes(sqlite, ["--db", str(path)], n, chunk, workers=2)
            )
            print(
                f"  SQLite      2 worker processes: enqueue {enq:>7,.0f}/s  drain {rate:>7,.0f}/s"
            )
    if options.no_postgres:
        return 0
    schema = "bench_q_" + secrets.token_hex(4)

    def postgres(_: object = None) -> TaskStore:
        from chongming.stores.postgres import PostgresTaskStore

        return PostgresTaskStore(DSN, schema=schema)

    enq, drain, cpu = asyncio.run(enqueue_and_drain(postgres, n, chunk, options.max_parallel))
    print(
        f"  PostgreSQL  in-process worker: enqueue {enq:>7,.0f}/s  drain {drain:>7,.0f}/s"
        f"  ({cpu:,.0f} µs CPU/task here)"
    )
    pg_options = ["--db", DSN, "--schema", schema]
    by_processes = {}
    for workers in (1, 2):
        enq, rate = asyncio.run(drain_with_processes(postgres, pg_options, n, chunk, workers))
        by_processes[workers] = rate
        label = f"{workers} worker process{'es' if workers > 1 else ''}:"
        print(f"  PostgreSQL  {label:<19} enqueue {enq:>7,.0f}/s  drain {rate:>7,.0f}/s")
    pgq_drain, pgq_overall = asyncio.run(pgqueuer_drain(n))
    pgq_enqueue = n / (n / pgq_overall - n / pgq_drain)
    print(
        f"  pgqueuer    in-process consumer: enqueue {pgq_enqueue:>7,.0f}/s"
        f"  drain {pgq_drain:>7,.0f}/s"
    )
    p50, p99 = asyncio.run(start_latency(postgres, 100))
    print(f"  PostgreSQL  enqueue -> start on an idle worker: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(
        f"ratio: PostgreSQL drain {drain / pgq_drain:.2f}x pgqueuer (goal >= 1.0, aim 1.5);"
        f" 1 process {by_processes[1] / pgq_drain:.2f}x,"
        f" 2 processes {by_processes[2] / pgq_drain:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
