"""What aging costs a claim: the same drain with strict priority and with aging, in one run.

    python benchmarks/bench_claim_aging.py [--n 10000] [--rounds 3] [--levels 1]

A client enqueues N trivial tasks over ``--levels`` priority levels; an
in-process worker drains them on PostgreSQL, full audit trail on, once with
the default ``WorkerPool()`` (strict priority: the claim statement as it was
before aging) and once with ``WorkerPool(age_step=60)`` (one level per 60 s:
the claim walks the priority levels present and ranks their oldest tasks).
Rounds alternate; medians are compared. Aging is off by default so that a
worker that does not ask for it keeps the strict statement's speed. The EXPLAIN
of both claim statements is printed once, to show the claim index serves
both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_control import DSN, drop
from bench_queue import Probe

from chongming import Controller
from chongming.controller.pools import WorkerPool


async def trivial(ctx: Any) -> int:
    return 1


async def drain(n: int, levels: int, max_parallel: int, pool: WorkerPool) -> float:
    from chongming.stores.postgres import PostgresTaskStore

    schema = "bench_a_" + secrets.token_hex(4)
    client_store = PostgresTaskStore(DSN, schema=schema)
    probe = Probe(client_store)
    async with Controller(store=client_store, owner="client") as client:
        for first in range(0, n, 500):
            size = min(500, n - first)
            for level in range(levels):
                await client.enqueue_many("trivial", [((), {})] * (size // levels), priority=level)
        worker_store = PostgresTaskStore(DSN, schema=schema)
        worker = Controller(
            store=worker_store,
            owner="worker",
            work=True,
            max_parallel=max_parallel,
            keep_finished=100,
            poll_interval=0.05,
            pool=pool,
        )
        worker.register("trivial", trivial)
        started = time.perf_counter()
        async with worker:
            await probe.wait_drained()
            seconds = time.perf_counter() - started
        await worker_store.close()
    await probe.close()
    await drop(client_store)
    await client_store.close()
    return seconds


async def explain() -> None:
    import asyncpg  # type: ignore[import-untyped]

    from chongming.stores.postgres import PostgresTaskStore
    from chongming.stores.postgres.claim_sql import claim_sql

    schema = "bench_e_" + secrets.token_hex(4)
    store = PostgresTaskStore(DSN, schema=schema)
    async with Controller(store=store, owner="client") as client:
        for _ in range(20):
            await client.enqueue_many("trivial", [((), {})] * 500)
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(f"ANALYZE {schema}.tasks")
        args = ["w", None, ["trivial"], [], [], 32]
        for label, sql, extra in (
            ("strict", claim_sql(schema, exclude=False), []),
            ("aged", claim_sql(schema, exclude=True, aged=True), [[], None, 60.0]),
        ):
            plan = await conn.fetch(f"EXPLAIN {sql}", *args, *extra)  # EXPLAIN runs nothing
            print(f"  EXPLAIN {label} claim (scans and sorts):")
            for row in plan:
                line = row[0]
                if "Scan" in line or "Sort" in line:
                    print(f"    {line.strip()}")
    finally:
        await conn.close()
    await drop(store)
    await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--levels", type=int, default=1)
    parser.add_argument("--max-parallel", type=int, default=500)
    options = parser.parse_args()
    asyncio.run(explain())
    variants = (("strict", WorkerPool()), ("aged", WorkerPool(age_step=60)))
    seconds: dict[str, list[float]] = {label: [] for label, _ in variants}
    n = options.n - options.n % options.levels
    print(f"drain {n:,} trivial tasks over {options.levels} priority level(s) on PostgreSQL:")
    for round_number in range(1, options.rounds + 1):
        for label, pool in variants:
            took = asyncio.run(drain(n, options.levels, options.max_parallel, pool))
            seconds[label].append(took)
            print(
                f"  round {round_number} {label:<6}: {took:6.2f} s ({n / took:,.0f} tasks/s;"
                f" load {os.getloadavg()[0]:.1f})"
            )
    ratio = statistics.median(seconds["aged"]) / statistics.median(seconds["strict"])
    print(f"  aged / strict drain time: {ratio:.2f}x (what asking for aging costs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
