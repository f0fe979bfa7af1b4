"""Write-through throughput of the stores vs raw batched inserts of the same rows.

Each of N tasks goes through a full trajectory: ``create`` (pending, version 0)
then four ``save(..., transitions=[t])`` calls (queued, starting, running,
succeeded), issued concurrently from many asyncio tasks so group commit can
work. Throughput is transitions per second. The baseline, in the same run,
writes exactly the same rows with plain aiosqlite: pre-encoded tuples,
``executemany`` in batched transactions, no compare-and-set bookkeeping.

    python benchmarks/bench_store.py --n 10000 --concurrency 500

PostgreSQL: ``benchmarks/bench_store_postgres.py`` reuses
:func:`build_trajectories`, :func:`drive_store` and :func:`report`; this script
runs it too when it exists and ``--postgres`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite

from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.sqlite.batch import INSERT_TASK, INSERT_TRANSITION, UPDATE_TASK
from chongming.stores.sqlite.rows import full_update_row, insert_row, transition_row
from chongming.stores.sqlite.schema import MIGRATIONS

PATH = (TaskStatus.QUEUED, TaskStatus.STARTING, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)
T0 = datetime(2026, 10, 2, 8, 0, tzinfo=UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Trajectory:
    """The five snapshots of one task and the four transitions between them."""

    snapshots: tuple[TaskSnapshot, ...]
    transitions: tuple[Transition, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    name: str
    transitions: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.transitions / self.seconds


def build_trajectories(n: int) -> list[Trajectory]:
    trajectories = []
    for i in range(n):
        snapshot = TaskSnapshot(
            task_id=f"bench-{i:06d}",
            name="extract",
            label=f"extract day {i}",
            status=TaskStatus.PENDING,
            status_version=0,
            attempt=0,
            max_attempts=3,
            created_at=T0 + timedelta(microseconds=i),
            updated_at=T0 + timedelta(microseconds=i),
            bucket=i % 64,
            bucket_key=f"tenant-{i % 64}",
            tags=frozenset({"io"}),
            owner="bench-node",
            args=("2026-10-02", i),
        )
        snapshots = [snapshot]
        transitions = []
        for to in PATH:
            at = snapshot.updated_at + timedelta(milliseconds=1)
            transition = Transition(
                task_id=snapshot.task_id,
                version=snapshot.status_version + 1,
                from_status=snapshot.status,
                to_status=to,
                at=at,
                trigger="bench:step",
                attempt=1,
            )
            snapshot = dataclasses.replace(
                snapshot,
                status=to,
                status_version=transition.version,
                attempt=1,
                updated_at=at,
                result=[f"part{j}" for j in range(3)] if to is TaskStatus.SUCCEEDED else None,
            )
            snapshots.append(snapshot)
            transitions.append(transition)
        trajectories.append(Trajectory(tuple(snapshots), tuple(transitions)))
    return trajectories


async def drive_store(
    name: str, store: TaskStore, trajectories: list[Trajectory], concurrency: int
) -> Result:
    """Run every trajectory through ``store`` from ``concurrency`` asyncio tasks."""
    queue = iter(trajectories)

    async def worker() -> None:
        for trajectory in queue:
            first, *rest = trajectory.snapshots
            await store.create(first)
            previous = first
            for snapshot, transition in zip(rest, trajectory.transitions, strict=True):
                await store.save(
                    snapshot, expect_version=previous.status_version, transitions=[transition]
                )
                previous = snapshot

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    seconds = time.perf_counter() - started
    return Result(name, 4 * len(trajectories), seconds)


async def drive_apply_writes(
    name: str,
    store: TaskStore,
    trajectories: list[Trajectory],
    batch: int,
    *,
    trusted: bool = False,
) -> Result:
    """The write-through shape: ``batch`` tasks per ``apply_writes`` call, one step at a time.

    ``trusted``: the writes are marked as the write-through marks its own
    (records the runtime made and checked), so the store does not check them again.
    """
    from chongming.stores.writes import StateWrite, WriteOutcome

    started = time.perf_counter()
    for start in range(0, len(trajectories), batch):
        chunk = trajectories[start : start + batch]
        steps = [
            [StateWrite(snapshot=t.snapshots[0], transitions=(), trusted=trusted) for t in chunk]
        ]
        for step in range(1, 5):
            steps.append(
                [
                    StateWrite(
                        snapshot=t.snapshots[step],
                        transitions=(t.transitions[step - 1],),
                        expect_version=t.snapshots[step - 1].status_version,
                        trusted=trusted,
                    )
                    for t in chunk
                ]
            )
        for writes in steps:
            results = await store.apply_writes(writes)
            assert all(r.outcome is WriteOutcome.WRITTEN for r in results), "a write was lost"
    seconds = time.perf_counter() - started
    label = "trusted apply_writes" if trusted else "apply_writes"
    return Result(f"{name}.{label}", 4 * len(trajectories), seconds)


async def bench_sqlite_apply_writes(
    directory: Path,
    trajectories: list[Trajectory],
    batch: int,
    max_batch: int,
    *,
    trusted: bool = False,
) -> Result:
    name = "trusted.db" if trusted else "apply.db"
    store = SqliteTaskStore(directory / name, max_batch=max_batch)
    async with store:
        result = await drive_apply_writes(
            "SqliteTaskStore", store, trajectories, batch, trusted=trusted
        )
        last = trajectories[-1].snapshots[-1]
        assert await store.get(last.task_id) == last, "the benchmark must write what it claims"
    return result


async def bench_postgres_apply_writes(
    dsn: str, trajectories: list[Trajectory], batch: int, group_commit: bool
) -> Result:
    import secrets

    import asyncpg  # type: ignore[import-untyped]  # benchmark-only import

    from chongming.stores.postgres import PostgresTaskStore

    schema = f"chongming_bench_{secrets.token_hex(4)}"
    store = PostgresTaskStore(dsn, schema=schema, group_commit=group_commit)
    try:
        async with store:
            mode = "group commit" if group_commit else "no group commit"
            result = await drive_apply_writes(
                f"PostgresTaskStore ({mode})", store, trajectories, batch
            )
    finally:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
    return result


async def bench_sqlite_store(
    directory: Path, trajectories: list[Trajectory], concurrency: int, max_batch: int
) -> Result:
    store = SqliteTaskStore(directory / "store.db", max_batch=max_batch)
    async with store:
        result = await drive_store("SqliteTaskStore", store, trajectories, concurrency)
        for trajectory in trajectories[:: max(1, len(trajectories) // 50)]:
            stored = await store.get(trajectory.snapshots[-1].task_id)
            assert stored == trajectory.snapshots[-1], "the benchmark must write what it claims"
    return result


async def bench_sqlite_raw(directory: Path, trajectories: list[Trajectory], batch: int) -> Result:
    """The same rows through plain aiosqlite: executemany in batched transactions."""
    steps: list[list[tuple[str, list[tuple[Any, ...]]]]] = []
    for start in range(0, len(trajectories), batch):
        chunk = trajectories[start : start + batch]
        steps.append([(INSERT_TASK, [insert_row(t.snapshots[0], None) for t in chunk])])
        for step in range(1, 5):
            # The whole row, as the baseline always wrote (the store writes less when it can).
            updates = [full_update_row(t.snapshots[step], None, step - 1) for t in chunk]
            transitions = [transition_row(t.transitions[step - 1]) for t in chunk]
            steps.append([(UPDATE_TASK, updates), (INSERT_TRANSITION, transitions)])
    async with aiosqlite.connect(directory / "raw.db", isolation_level=None) as conn:
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("PRAGMA synchronous = NORMAL")
        for migration in MIGRATIONS:
            for statement in migration.statements:
                await conn.execute(statement)
        started = time.perf_counter()
        for statements in steps:
            await conn.execute("BEGIN IMMEDIATE")
            for sql, rows in statements:
                await conn.executemany(sql, rows)
            await conn.execute("COMMIT")
        seconds = time.perf_counter() - started
    return Result("raw aiosqlite executemany", 4 * len(trajectories), seconds)


def report(store: Result, raw: Result) -> float:
    ratio = store.rate / raw.rate
    for result in (store, raw):
        print(
            f"  {result.name:<28} {result.transitions:>7} transitions"
            f" in {result.seconds:6.2f} s = {result.rate:>9,.0f} transitions/s"
        )
    print(f"  ratio store/raw = {ratio:.2f}x (goal >= 0.6x)")
    return ratio


def best(results: list[Result]) -> Result:
    return min(results, key=lambda result: result.seconds)


async def run_sqlite(args: argparse.Namespace) -> float:
    """Alternate baseline and store runs (a noisy machine hurts both alike); keep each best."""
    trajectories = build_trajectories(args.n)
    raws: list[Result] = []
    stores: list[Result] = []
    applied: list[Result] = []
    trusted: list[Result] = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="chongming-bench-") as directory:
            raws.append(await bench_sqlite_raw(Path(directory), trajectories, args.batch))
            stores.append(
                await bench_sqlite_store(
                    Path(directory), trajectories, args.concurrency, args.max_batch
                )
            )
            applied.append(
                await bench_sqlite_apply_writes(
                    Path(directory), trajectories, args.batch, args.max_batch
                )
            )
            trusted.append(
                await bench_sqlite_apply_writes(
                    Path(directory), trajectories, args.batch, args.max_batch, trusted=True
                )
            )
    print(
        f"SQLite (WAL, synchronous=NORMAL), N={args.n} tasks, concurrency={args.concurrency},"
        f" max_batch={args.max_batch}, apply_writes batch={args.batch}, best of {args.repeat}"
    )
    ratio = report(best(stores), best(raws))
    report(best(applied), best(raws))
    report(best(trusted), best(raws))
    return ratio


async def run_postgres_apply_writes(args: argparse.Namespace) -> None:
    import os

    dsn = os.environ.get("CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    trajectories = build_trajectories(args.n)
    print(f"PostgreSQL apply_writes, N={args.n} tasks, batch={args.batch}, best of {args.repeat}")
    for group_commit in (True, False):
        runs = [
            await bench_postgres_apply_writes(dsn, trajectories, args.batch, group_commit)
            for _ in range(args.repeat)
        ]
        result = best(runs)
        print(
            f"  {result.name:<28} {result.transitions:>7} transitions"
            f" in {result.seconds:6.2f} s = {result.rate:>9,.0f} transitions/s"
        )


def run_postgres(args: argparse.Namespace) -> None:
    """The PostgreSQL half lives in bench_store_postgres.py (its ``main(argv)``)."""
    path = Path(__file__).with_name("bench_store_postgres.py")
    if not path.exists():
        print("PostgreSQL: benchmarks/bench_store_postgres.py is not there; skipped")
        return
    spec = importlib.util.spec_from_file_location("bench_store_postgres", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.main(["--n", str(args.n), "--concurrency", str(args.concurrency)])
    asyncio.run(run_postgres_apply_writes(args))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="tasks (4 transitions each)")
    parser.add_argument("--concurrency", type=int, default=1000, help="asyncio tasks writing")
    parser.add_argument("--max-batch", type=int, default=500, help="store writes per txn")
    parser.add_argument("--batch", type=int, default=1000, help="raw baseline tasks per txn")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best of each is kept")
    parser.add_argument("--postgres", action="store_true", help="also run the PostgreSQL half")
    args = parser.parse_args(argv)
    asyncio.run(run_sqlite(args))
    if args.postgres:
        run_postgres(args)


if __name__ == "__main__":
    main()
