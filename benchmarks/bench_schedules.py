"""Fire delay of a schedule with three ``chongming worker`` processes; beside a bare timer.

    python benchmarks/bench_schedules.py [--seconds 20] [--no-postgres] [--no-sqlite]

A client puts a 1-second schedule (``every=timedelta(seconds=1)``) on a store
that three worker processes serve, and watches the schedule's ``last_fired``
every 2 ms: the *fire delay* of a tick is when the store first shows it fired
(its task enqueued, its ``next_fire`` advanced: one decision) minus the tick's
own time. The three workers race for every tick; one wins.

Baseline, same store kind, same run: one process with a bare asyncio timer
that sleeps until each tick and enqueues a task keyed by the tick (what any
cron-in-a-process costs, with no fleet, no compare-and-set and no catch-up).
The ratio is chongming's p50 over the baseline's. Goal: p50 <= 50 ms.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chongming import Controller  # noqa: E402
from chongming.state.query import TaskQuery  # noqa: E402
from chongming.stores.base import TaskStore  # noqa: E402

DSN = os.environ.get("CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PERIOD = timedelta(seconds=1)


def _store(kind: str, where: str) -> TaskStore:
    if kind == "sqlite":
        from chongming import SqliteTaskStore

        return SqliteTaskStore(where)
    from chongming.stores.postgres import PostgresTaskStore

    return PostgresTaskStore(DSN, schema=where)


def _options(kind: str, where: str) -> list[str]:
    return ["--db", where] if kind == "sqlite" else ["--db", DSN, "--schema", where]


def _worker(options: list[str], owner: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["worker", "--tasks", "tests.cli.schedule_tasks", "--max-parallel", "4"]
    return subprocess.Popen(
        [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
    )


async def _watch(store: TaskStore, key: str, seconds: float) -> list[float]:
    """Delays (ms) from each tick to the moment the store shows it fired."""
    delays: list[float] = []
    seen = None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        record = await store.get_schedule(key)
        observed = datetime.now(UTC)
        if record is not None and record.last_fired is not None and record.last_fired != seen:
            if seen is not None:  # the first one may predate the watch
                delays.append((observed - record.last_fired) / timedelta(milliseconds=1))
            seen = record.last_fired
        await asyncio.sleep(0.002)
    return delays


async def chongming_delays(kind: str, where: str, seconds: float) -> list[float]:
    from tests.cli.schedule_tasks import tick

    workers = [_worker(_options(kind, where), f"bench-{n}") for n in range(3)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            await asyncio.to_thread(worker.stdout.readline)  # "serving ..."
        store = _store(kind, where)
        async with Controller(store=store, owner="bench-client") as client:
            client.register("tick", tick)
            await client.schedule("tick", every=PERIOD, key="bench")
            delays = await _watch(store, "bench", seconds)
            await client.pause_schedule("bench")
            keys = [t.idempotency_key for t in await client.list_tasks(TaskQuery())]
            assert len(keys) == len(set(keys)), "a tick fired twice"
            await client.close(close_store=True)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=30)
    return delays


async def baseline_delays(kind: str, where: str, seconds: float) -> list[float]:
    """A bare timer in one process: sleep until the tick, enqueue it, note when it is in."""
    from chongming.clock import SYSTEM_CLOCK
    from chongming.controller.enqueue import EnqueueRequest, build_enqueued
    from chongming.stores.schedules import tick_key
    from chongming.task_api.registry import TaskRegistry

    store = _store(kind, where)
    registry = TaskRegistry()
    delays: list[float] = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            now = datetime.now(UTC)
            tick = now.replace(microsecond=0) + PERIOD
            await asyncio.sleep((tick - now) / timedelta(seconds=1))
            request = EnqueueRequest(
                name="tick", args=(), kwargs={}, idempotency_key=tick_key("baseline", tick)
            )
            snapshot, transition = build_enqueued(request, registry, SYSTEM_CLOCK, None)
            await store.enqueue(snapshot, [transition])
            delays.append((datetime.now(UTC) - tick) / timedelta(milliseconds=1))
    finally:
        await store.close()
    return delays


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_kind(kind: str, seconds: float) -> None:
    if kind == "sqlite":
        directory = tempfile.mkdtemp(prefix="bench-sched-")
        where, base = f"{directory}/s.db", f"{directory}/b.db"
    else:
        where, base = f"bench_sched_{secrets.token_hex(4)}", f"bench_base_{secrets.token_hex(4)}"
    ours = await chongming_delays(kind, where, seconds)
    theirs = await baseline_delays(kind, base, seconds)
    if kind == "postgres":
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(DSN)
        try:
            for schema in (where, base):
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
    p50, base50 = statistics.median(ours), statistics.median(theirs)
    print(
        f"{kind:8} 3 workers: fire delay p50 {p50:6.1f} ms  p90 {_p(ours, 0.9):6.1f} ms  "
        f"max {max(ours):6.1f} ms  ({len(ours)} ticks)  | bare timer p50 {base50:5.1f} ms  "
        f"ratio {p50 / base50:4.2f}x  goal p50 <= 50 ms: {'met' if p50 <= 50 else 'MISSED'}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    if not options.no_sqlite:
        await one_kind("sqlite", options.seconds)
    if not options.no_postgres:
        await one_kind("postgres", options.seconds)


if __name__ == "__main__":
    asyncio.run(main())
