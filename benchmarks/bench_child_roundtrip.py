"""One child round trip on PostgreSQL, on an idle worker: chongming beside DBOS, one run.

A round trip: a client starts a durable parent, the parent starts one child
and waits for its result, the client waits for the parent's result. Measured
from the client's start call to the parent's result in the client, one at a
time (``--n`` of them, after ``--warmup``), so each one meets an idle worker.

- chongming: ``client.enqueue("parent", n)`` then ``QueuedTask.result()``
  (woken by the end's NOTIFY); the parent does ``await ctx.child("child", n)``
  (a memoised enqueue, then the parent parks until the child's end, delivered
  as its fact in the child's terminal transaction). One worker controller in
  this process (``work=True``), claims woken by the enqueue's NOTIFY, polling
  every ``--poll`` seconds besides.
- DBOS 3.4 (benchmark-only dependency, ``pip install -e '.[bench]'``; without
  it the DBOS side is skipped with a note): ``DBOS.start_workflow_async(parent,
  n)`` then ``handle.get_result()``; the parent workflow does
  ``DBOS.start_workflow_async(child, n)`` and awaits ``get_result()`` (its
  child workflow). No queue: DBOS runs a started workflow in this process at
  once, so its side has no claim at all; chongming's crosses the work queue
  twice (parent and child), as any worker in a fleet would.

The issue's goal: chongming p50 <= 15 ms. Both on the same server, each in a
database or schema of its own, dropped afterwards.

Run: ``.venv/bin/python benchmarks/bench_child_roundtrip.py [--n 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_control import drop, pg_pair

from chongming import Controller, TaskContext


async def child(ctx: TaskContext, n: int) -> int:
    return n * 2


async def parent(ctx: TaskContext, n: int) -> int:
    doubled: int = await ctx.child("child", n)
    return doubled + 1


def _register(controller: Controller) -> None:
    controller.register("child", child)
    controller.register("parent", parent, durable=True)


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


async def chongming_round_trips(n: int, warmup: int, poll: float) -> list[float]:
    client_store, worker_store = pg_pair()  # one fresh schema, two stores
    samples: list[float] = []
    try:
        async with Controller(store=client_store, owner="client", poll_interval=poll) as client:
            worker = Controller(
                store=worker_store, owner="worker", work=True, max_parallel=4, poll_interval=poll
            )
            _register(worker)
            async with worker:
                for k in range(warmup + n):
                    started = time.perf_counter()
                    queued = await client.enqueue("parent", k)
                    value = await queued.result(timeout=60)
                    elapsed = time.perf_counter() - started
                    assert value == k * 2 + 1, value
                    if k >= warmup:
                        samples.append(elapsed)
    finally:
        await client_store.close()
        await worker_store.close()
        await drop(client_store)
    return samples


async def dbos_round_trips(n: int, warmup: int) -> list[float] | None:
    try:
        from dbos import DBOS
    except ImportError:
        print("dbos is not installed (pip install -e '.[bench]'): its side is skipped")
        return None
    from bench_durable_dbos import throwaway_database

    @DBOS.workflow()
    async def dbos_child(n: int) -> int:
        return n * 2

    @DBOS.workflow()
    async def dbos_parent(n: int) -> int:
        handle = await DBOS.start_workflow_async(dbos_child, n)
        doubled: int = await handle.get_result()
        return doubled + 1

    samples: list[float] = []
    async with throwaway_database(f"chongming_bench_child_{os.getpid()}", False) as dsn:
        config: Any = {
            "name": "chongming-bench-child",
            "system_database_url": dsn,
            "log_level": "WARNING",
        }
        DBOS(config=config)
        try:
            DBOS.launch()
            for k in range(warmup + n):
                started = time.perf_counter()
                handle = await DBOS.start_workflow_async(dbos_parent, k)
                value = await handle.get_result()
                elapsed = time.perf_counter() - started
                assert value == k * 2 + 1, value
                if k >= warmup:
                    samples.append(elapsed)
        finally:
            DBOS.destroy(destroy_registry=True)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--poll", type=float, default=0.5)
    args = parser.parse_args()
    print(f"child round trips on PostgreSQL, one at a time: n={args.n} (after {args.warmup})")
    ours = await chongming_round_trips(args.n, args.warmup, args.poll)
    print(f"chongming  ctx.child:              {_percentiles(ours)}")
    theirs = await dbos_round_trips(args.n, args.warmup)
    if theirs is not None:
        print(f"DBOS 3.4   child workflow:         {_percentiles(theirs)}")
        ratio = statistics.median(theirs) / statistics.median(ours)
        print(f"ratio DBOS p50 / chongming p50:   {ratio:.2f} (above 1: chongming is faster)")


if __name__ == "__main__":
    asyncio.run(main())
