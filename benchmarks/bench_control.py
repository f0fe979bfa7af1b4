"""The control plane beside its baselines, every figure from one process run.

    python benchmarks/bench_control.py [--n 10000] [--postgres DSN]

- throughput: submit N trivial tasks and wait until all ended, full audit
  trail on, through a controller with no store, on SQLite, on PostgreSQL,
  and pgqueuer (benchmark-only dependency) enqueuing and draining N jobs on
  the same PostgreSQL server;
- stop latency: a stop command from a second controller (its own store
  connection) until ``stopping`` is visible in the store, p50 / p99;
- event-loop lag p99 while N tasks run with write-through;
- lease renewal with 10 vs 10,000 live tasks (the ratio should be ~1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import statistics
import tempfile
import time
from typing import Any

from chongming import Controller, ControlWindows, SqliteTaskStore, TaskStatus
from chongming.stores.base import TaskStore

DSN = os.environ.get("CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PARALLEL = 1000
CHUNK = 1000


async def trivial(ctx: Any) -> int:
    return 1


async def waits(ctx: Any, gate: str) -> None:
    """Held until stopped, asleep: the loop stays idle however many are held."""
    await ctx.checkpoint()
    await asyncio.sleep(3600)


def pg_store(schema: str | None = None) -> TaskStore:
    from chongming.stores.postgres import PostgresTaskStore

    return PostgresTaskStore(DSN, schema=schema or "bench_" + secrets.token_hex(4))


def pg_pair() -> tuple[TaskStore, TaskStore]:
    schema = "bench_" + secrets.token_hex(4)
    return pg_store(schema), pg_store(schema)


async def drop(store: TaskStore) -> None:
    from chongming.stores.postgres import PostgresTaskStore

    if isinstance(store, PostgresTaskStore):
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(DSN)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {store.schema} CASCADE")
        finally:
            await conn.close()


async def throughput(store: TaskStore | None, n: int, chunk: int = CHUNK) -> float:
    """Tasks per second from the first submit to the last durable end.

    Submits go out ``chunk`` at a time (``asyncio.gather``), like concurrent
    requests of a web service.
    """
    async with Controller(store=store, max_parallel=PARALLEL, keep_finished=n) as controller:
        controller.register("trivial", trivial)
        started = time.perf_counter()
        for first in range(0, n, chunk):
            await asyncio.gather(
                *(controller.submit("trivial") for _ in range(first, min(n, first + chunk)))
            )
        outcomes = await controller.wait_all()
        elapsed = time.perf_counter() - started
        assert len(outcomes) == n
        assert all(o.ok for o in outcomes)
        assert controller.persist_failures.ok
    if store is not None:
        await store.close()
    return n / elapsed


async def pgqueuer_drain(n: int) -> tuple[float, float]:
    """(drain jobs/s, enqueue+drain jobs/s) with one consumer, batch 32."""
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    admin = await asyncpg.connect(DSN)
    name = "bench_pgq_" + secrets.token_hex(3)
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        conn = await asyncpg.connect(DSN.rsplit("/", 1)[0] + "/" + name)
        try:
            driver = AsyncpgDriver(conn)
            queries = Queries(driver)
            await queries.install()
            manager = QueueManager(queries)

            @manager.entrypoint("trivial")
            async def job(_: Any) -> None:
                return None

            started = time.perf_counter()
            for first in range(0, n, CHUNK):
                size = min(CHUNK, n - first)
                await queries.enqueue(["trivial"] * size, [None] * size, [0] * size)
            enqueued = time.perf_counter()
            await manager.run(mode=QueueExecutionMode.drain, batch_size=32)
            done = time.perf_counter()
        finally:
            await conn.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    return n / (done - enqueued), n / (done - started)


async def stop_latency(pair: Any, samples: int, poll_interval: float) -> tuple[float, float]:
    """(p50, p99) seconds from a stop command to ``stopping`` in the store."""
    holder_store, ops_store = pair()
    latencies = []
    async with (
        Controller(
            store=holder_store, owner="holder", max_parallel=samples, poll_interval=poll_interval
        ) as holder,
        Controller(store=ops_store, owner="ops") as ops,
    ):
        holder.register("waits", waits)
        runs = [await holder.submit("waits", "g", task_id=f"s{i}") for i in range(samples)]
        while any(run.status is not TaskStatus.RUNNING for run in runs):
            await asyncio.sleep(0.01)
        rng = random.Random(7)
        for run in runs:
            # Requests arrive at random moments of the poll cycle, not just after a poll.
            await asyncio.sleep(rng.uniform(0, poll_interval))
            started = time.perf_counter()
            await ops.stop(run.task_id)
            while True:
                stored = await ops_store.get(run.task_id)
                assert stored is not None
                if stored.status is not TaskStatus.RUNNING:
                    break
                await asyncio.sleep(0.0005)
            latencies.append(time.perf_counter() - started)
        await holder.wait_all()
    for store in (holder_store, ops_store):
        await store.close()
    await drop(holder_store)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


async def loop_lag(store: TaskStore, n: int) -> float:
    """p99 lateness (s) of a 10 ms ticker while N tasks run with write-through."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            due = loop.time() + 0.01
            await asyncio.sleep(0.01)
            lags.append(max(0.0, loop.time() - due))

    tick = asyncio.create_task(ticker())
    await throughput(store, n, chunk=100)  # 100 concurrent requests at a time
    stop.set()
    await tick
    lags.sort()
    return lags[int(len(lags) * 0.99) - 1] if lags else 0.0


async def renewal_cost(make: Any, live: int, rounds: int = 50) -> float:
    """Seconds per lease renewal while ``live`` tasks are held."""
    store = make()
    windows = ControlWindows(stop_grace=0.1, cancel_window=1.0)
    async with Controller(
        store=store, owner=f"n{live}", max_parallel=live, windows=windows
    ) as controller:
        controller.register("waits", waits)
        for first in range(0, live, CHUNK):
            await asyncio.gather(
                *(controller.submit("waits", "g") for _ in range(first, min(live, first + CHUNK)))
            )
        plane = controller._plane
        assert plane is not None
        runs = list(controller._host.runs())
        while any(run.status is not TaskStatus.RUNNING for run in runs):
            await asyncio.sleep(0.05)
        await asyncio.sleep(2)  # let the writes of the starts settle
        started = time.perf_counter()
        for _ in range(rounds):
            assert await plane.node.renew_once()
        per = (time.perf_counter() - started) / rounds
        await controller.stop_all()
    await store.close()
    await drop(store)
    return per


async def main(n: int, postgres: bool) -> None:
    with tempfile.TemporaryDirectory() as directory:
        counter = iter(range(1000))

        def sqlite() -> TaskStore:
            return SqliteTaskStore(os.path.join(directory, f"b{next(counter)}.db"))

        def sqlite_pair() -> tuple[TaskStore, TaskStore]:
            path = os.path.join(directory, f"b{next(counter)}.db")
            return SqliteTaskStore(path), SqliteTaskStore(path)

        none = await throughput(None, n)
        lite = await throughput(sqlite(), n)
        print(f"throughput, {n:,} trivial tasks, submit -> durable end (tasks/s)")
        print(f"  no store      {none:>9,.0f}")
        print(f"  SQLite        {lite:>9,.0f}   {lite / none:.2f}x of no store")
        pg = None
        if postgres:
            store = pg_store()
            pg = await throughput(store, n)
            await drop(store)
            drain, overall = await pgqueuer_drain(n)
            print(f"  PostgreSQL    {pg:>9,.0f}   {pg / none:.2f}x of no store")
            print(
                f"  pgqueuer 1.6  {drain:>9,.0f}   drain only ({overall:,.0f} counting its enqueue)"
            )
            print(
                f"  ratios: PostgreSQL {pg / drain:.2f}x pgqueuer (goal >= 1.0, aim 1.5); "
                f"SQLite {lite / drain:.2f}x pgqueuer (goal >= 1.0)"
            )
        p50, p99 = await stop_latency(sqlite_pair, 50, poll_interval=0.1)
        print(
            f"stop latency, SQLite polling every 0.1 s: p50 {p50 * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms (goal p50 <= 55 ms)"
        )
        if postgres:
            p50, p99 = await stop_latency(pg_pair, 50, poll_interval=1.0)
            print(
                f"stop latency, PostgreSQL LISTEN (poll 1 s): p50 {p50 * 1000:.1f} ms, "
                f"p99 {p99 * 1000:.1f} ms (goal p50 <= 10 ms)"
            )
        lag = await loop_lag(sqlite(), n)
        print(
            f"event-loop lag p99 while {n:,} tasks run on SQLite: {lag * 1000:.1f} ms (goal <= 50)"
        )
        few, many = await renewal_cost(sqlite, 10), await renewal_cost(sqlite, 10_000)
        print(
            f"lease renewal, SQLite: 10 live {few * 1e6:.0f} us, 10,000 live {many * 1e6:.0f} us, "
            f"ratio {many / few:.2f} (goal <= 1.5)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args()
    asyncio.run(main(options.n, not options.no_postgres))
