"""Terminal tasks pruned per second on PostgreSQL, alone and beside a worker draining a queue.

    python benchmarks/bench_prune.py [--n 200000] [--batch 1000] [--drain 2000]

Each round seeds ``--n`` succeeded tasks (four history rows each, written by
``generate_series``: tests/stores/pg_retention.py) into a fresh schema and
prunes them all with ``prune_store`` in batches of ``--batch``:

- alone: nothing else touches the store (the baseline);
- beside: a ``Controller(work=True, max_parallel=8)`` drains ``--drain``
  queued tasks in this process while the prune runs, and a probe claims one
  task at a time through a connection with ``lock_timeout = 50ms`` (a claim
  that waited on a lock that long would fail and be counted).

Printed: tasks/s (and rows/s: a task and its four history rows) of each,
the ratio of beside to alone, the ratio to the goal of 20,000 tasks/s, and
the probe's claim latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chongming import Controller
from chongming.plane.pruner import prune_store
from chongming.stores.postgres import PostgresTaskStore
from chongming.stores.retention import PruneSelection
from tests.stores.pg_retention import lock_timeout_store, prune_beside, seed_terminal_sql

DSN = os.environ.get("CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
GOAL = 20_000.0


async def record(ctx: Any, n: int) -> int:
    return n


async def _schema(name: str, n: int) -> PostgresTaskStore:
    import asyncpg  # type: ignore[import-untyped]

    store = PostgresTaskStore(DSN, schema=name)
    await store.open()
    conn = await asyncpg.connect(DSN)
    try:
        seconds = await seed_terminal_sql(conn, name, n)
    finally:
        await conn.close()
    print(f"  seeded {n:,} terminal tasks in {seconds:.1f} s", flush=True)
    return store


async def _drop(name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await conn.close()


async def alone(n: int, batch: int) -> float:
    name = f"bench_prune_alone_{os.getpid()}"
    await _drop(name)
    store = await _schema(name, n)
    try:
        from datetime import UTC, datetime, timedelta

        cut = datetime.now(UTC) - timedelta(days=7)
        report = await prune_store(store, [PruneSelection(finished_before=cut)], batch=batch)
        assert report.tasks == n, report
        return report.tasks / report.seconds
    finally:
        await store.close()
        await _drop(name)


async def beside(n: int, batch: int, drain: int) -> tuple[float, Any]:
    name = f"bench_prune_beside_{os.getpid()}"
    await _drop(name)
    store = await _schema(name, n)
    pool, probe = await lock_timeout_store(DSN, name)
    try:
        async with Controller(
            store=store, owner="drainer", work=True, max_parallel=8, poll_interval=0.05
        ) as worker:
            worker.register("record", record)
            queued = [await worker.enqueue("record", i, task_id=f"new-{i}") for i in range(drain)]
            report, figures = await prune_beside(store, probe, batch=batch)
            done = await asyncio.gather(*(task.wait(timeout=300) for task in queued))
        assert report.tasks == n, report
        assert all(final.status == "succeeded" for final in done)
        return report.tasks / report.seconds, figures
    finally:
        await probe.close()
        await pool.close()
        await store.close()
        await _drop(name)


async def main(n: int, batch: int, drain: int) -> None:
    print(f"prune {n:,} terminal tasks, batch {batch}, PostgreSQL", flush=True)
    base = await alone(n, batch)
    rate, figures = await beside(n, batch, drain)
    print(f"alone:  {base:>10,.0f} tasks/s ({base * 5:,.0f} rows/s)")
    print(f"beside: {rate:>10,.0f} tasks/s ({rate * 5:,.0f} rows/s), a worker draining {drain:,}")
    print(
        f"probe claims during the prune: {figures.claims}, p50 {figures.p50_ms:.2f} ms,"
        f" p99 {figures.p99_ms:.2f} ms, max {figures.max_ms:.2f} ms, lock waits > 50 ms:"
        f" {figures.blocked}"
    )
    print(f"ratio beside/alone: {rate / base:.2f}x; beside/goal (20,000/s): {rate / GOAL:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--drain", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.batch, args.drain))
