"""What a rate limit costs per start: the same queue drained with and without one, in one run.

    python benchmarks/bench_rate_limits.py [--n 3000] [--rounds 3] [--no-sqlite] [--no-postgres]

A client enqueues N trivial tasks tagged ``vendor-api``; an in-process worker
(``Controller(work=True, max_parallel=...)``) drains them, full audit trail
on, once with no rate limit and once with ``rate_limits={"vendor-api":
"10000/s burst 100000"}``, a limit that never binds: every start asks the
store for its grant (one decision per claim, for all its tagged tasks), but
none waits. The ratio is the drain time with the limit over the drain time
without it (goal <= 1.3x). A third variant declares a limit on a tag no task
carries: the limited worker's claim path without any grant, to show which
part of the cost is the path and which the grants. Rounds alternate the
variants so all see the same load; the medians are compared, every round is
printed.

Besides the grant, a limited worker claims through ``claim_granted`` (on
PostgreSQL one transaction: the candidates locked, the grants, the granted
started; elsewhere a plain claim, the grants and one ``start_claimed``),
where an unlimited one claims and starts in one statement
(``claim_started``): the ratio includes that, since it is what a rate limit
costs a deployment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_control import DSN, drop
from bench_queue import Probe

from chongming import Controller, SqliteTaskStore
from chongming.stores.base import TaskStore

MakeStore = Callable[[], TaskStore]
NEVER_BINDS = "10000/s burst 100000"


async def trivial(ctx: Any) -> int:
    return 1


async def drain(make_store: MakeStore, n: int, max_parallel: int, limit: str | None) -> float:
    """Seconds from the worker's start until the store holds nothing unfinished."""
    client_store = make_store()
    probe = Probe(client_store)
    async with Controller(store=client_store, owner="client") as client:
        client.register("trivial", trivial, tags=("vendor-api",))
        for first in range(0, n, 500):
            await client.enqueue_many("trivial", [((), {})] * min(500, n - first))
        worker_store = make_store()
        worker = Controller(
            store=worker_store,
            owner="worker",
            work=True,
            max_parallel=max_parallel,
            keep_finished=100,
            poll_interval=0.05,
            rate_limits=None if limit is None else {limit: NEVER_BINDS},
        )
        worker.register("trivial", trivial, tags=("vendor-api",))
        started = time.perf_counter()
        async with worker:
            await probe.wait_drained()
            seconds = time.perf_counter() - started
        await worker_store.close()
    await probe.close()
    await drop(client_store)
    await client_store.close()
    return seconds


#: (what, the limit's tag): none; a limit on a tag no task carries (the limited
#: worker's claim path, no grant asked); the tasks' own tag (a grant per claim).
VARIANTS = (("no limit", None), ("path only", "other-api"), ("rate limit", "vendor-api"))


def compare(label: str, stores: Callable[[], MakeStore], n: int, rounds: int, mp: int) -> None:
    seconds: dict[str, list[float]] = {what: [] for what, _ in VARIANTS}
    for round_number in range(1, rounds + 1):
        for what, limit in VARIANTS:
            took = asyncio.run(drain(stores(), n, mp, limit))
            seconds[what].append(took)
            print(
                f"  {label:<10} round {round_number} {what:<10}: {took:6.2f} s"
                f"  ({took / n * 1e6:,.0f} µs per start; load {os.getloadavg()[0]:.1f})"
            )
    base = statistics.median(seconds["no limit"])
    path = statistics.median(seconds["path only"]) / base
    ratio = statistics.median(seconds["rate limit"]) / base
    print(
        f"  {label:<10} overhead per start with a rate limit: {ratio:.2f}x"
        f" the same queue without one (goal <= 1.3x); the claim path alone {path:.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-parallel", type=int, default=100)
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args()
    n, rounds, mp = options.n, options.rounds, options.max_parallel
    print(f"drain {n:,} trivial tagged tasks, max_parallel {mp}, full audit trail:")
    if not options.no_sqlite:
        with tempfile.TemporaryDirectory() as directory:
            counter = iter(range(10**6))

            def sqlite_stores() -> MakeStore:
                path = Path(directory) / f"queue-{next(counter)}.db"
                return lambda: SqliteTaskStore(path)

            compare("SQLite", sqlite_stores, n, rounds, mp)
    if not options.no_postgres:

        def pg_stores() -> MakeStore:
            from chongming.stores.postgres import PostgresTaskStore

            schema = "bench_r_" + secrets.token_hex(4)
            return lambda: PostgresTaskStore(DSN, schema=schema)

        compare("PostgreSQL", pg_stores, n, rounds, mp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
