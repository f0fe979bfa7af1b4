"""What durable steps cost, beside plain awaits of the same function, in one process run.

    python benchmarks/bench_durable.py [--steps 1000] [--postgres DSN]

For each store (SQLite in a temporary file; PostgreSQL when a DSN is given
or CHONGMING_TEST_POSTGRES is set), a worker runs one durable task whose
first attempt awaits the same trivial coroutine ``steps`` times plainly (the
baseline), then ``steps`` times through ``ctx.step`` (each recorded in the
store), then fails on purpose; its retry replays the ``steps`` recorded
steps. Reported: per-step cost of recording and of replaying, and their
ratio to the plain await. Then, on SQLite with two worker processes
(lease TTL 1 s): the time from ``kill -9`` of the worker running a durable
task to the task running again on the other (the goal: within TTL + 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskContext
from chongming.stores.base import TaskStore

ROOT = Path(__file__).resolve().parents[1]
TIMES: dict[str, float] = {}


async def trivial(value: int) -> int:
    return value


async def measured(ctx: TaskContext, steps: int) -> int:
    clock = time.perf_counter
    if ctx.attempt == 1:
        began = clock()
        for n in range(steps):
            await trivial(n)
        TIMES["plain"] = clock() - began
        began = clock()
        for n in range(steps):
            await ctx.step("s", trivial, n)
        TIMES["record"] = clock() - began
        raise RuntimeError("fail once, so the retry replays")
    began = clock()
    for n in range(steps):
        await ctx.step("s", trivial, n)
    TIMES["replay"] = clock() - began
    return steps


async def one_store(label: str, store: TaskStore | Path, steps: int) -> None:
    """The worker closes the store it was given (``close_store=True``)."""
    TIMES.clear()
    worker = Controller(store=store, owner="bench-worker", work=True, poll_interval=0.01)
    retry = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.001))
    worker.register("measured", measured, durable=True, retry=retry)
    async with worker:
        queued = await worker.enqueue("measured", steps)
        final = await queued.wait(timeout=600)
        await worker.close(close_store=True)
    assert final.result == steps, final
    plain = TIMES["plain"] / steps * 1e6
    record = TIMES["record"] / steps * 1e6
    replay = TIMES["replay"] / steps * 1e6
    print(
        f"{label}: {steps:,} steps  plain await {plain:.2f} us  record {record:.0f} us "
        f"({record / plain:,.0f}x)  replay {replay:.1f} us ({replay / plain:,.0f}x); "
        f"replay of {steps:,} recorded steps {TIMES['replay'] * 1000:.1f} ms",
        flush=True,
    )


def _worker(db: Path, owner: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "chongming", "--db", str(db), "--owner", owner, "worker"]
    command += ["--tasks", "tests.cli.durable_tasks", "--lease-ttl", "1", "--grace", "1"]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env
    )


async def resume_after_kill(directory: Path) -> None:
    db, ledger = directory / "resume.db", directory / "ledger.txt"
    workers = [_worker(db, f"w-{n}") for n in range(2)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            await asyncio.to_thread(worker.stdout.readline)  # "serving ..."
        async with Controller(store=db, owner="bench") as client:
            queued = await client.enqueue("ten_steps", str(ledger), 0.3, task_id="r-1")
            while not ledger.exists() or not ledger.read_text().strip():
                await asyncio.sleep(0.005)
            pid = int(ledger.read_text().split()[-1])
            victim = next(w for w in workers if w.pid == pid)
            victim.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await asyncio.to_thread(victim.wait)
            other = next(w for w in workers if w is not victim)
            while not any(
                line.endswith(str(other.pid)) for line in ledger.read_text().splitlines()
            ):
                await asyncio.sleep(0.005)
            resumed = time.monotonic() - killed
            final = await queued.wait(timeout=60)
        print(
            f"kill -9 of the worker running a durable task -> running again on the other: "
            f"{resumed:.2f} s (lease TTL 1 s; goal <= 2 s); the task ended {final.status.value}",
            flush=True,
        )
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
            if worker.stdout is not None:
                worker.stdout.close()


async def main(steps: int, dsn: str | None) -> None:
    with tempfile.TemporaryDirectory() as directory:
        await one_store("sqlite", Path(directory) / "bench.db", steps)
        if dsn:
            from chongming.stores.postgres import PostgresTaskStore

            schema = f"bench_durable_{os.getpid()}"
            store = PostgresTaskStore(dsn, schema=schema)
            try:
                await one_store("postgres", store, steps)
            finally:
                await _drop(dsn, schema)
        await resume_after_kill(Path(directory))


async def _drop(dsn: str, schema: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--postgres", default=os.environ.get("CHONGMING_TEST_POSTGRES"))
    options = parser.parse_args()
    asyncio.run(main(options.steps, options.postgres))
