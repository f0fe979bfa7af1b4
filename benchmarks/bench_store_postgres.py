"""Write-through throughput of PostgresTaskStore beside a raw asyncpg baseline.

N tasks each go through a full trajectory: ``create`` then four
``save(..., transitions=[t])`` calls (queued, starting, running, succeeded),
issued concurrently from many asyncio tasks, each task's steps in order.
Two raw baselines run in the same process run, both with asyncpg
``executemany`` in batched transactions of ``--batch`` tasks:

- *final rows*: the rows that end up stored (N task rows in their final
  state, 4N transition rows) — the strictest bar;
- *same writes*: the writes the trajectory makes (insert the task, then per
  step a compare-and-set UPDATE of the task row and an INSERT of the
  transition) — the same database work the store does, without the store.

Everything works in throwaway schemas that are dropped at the end.

    python benchmarks/bench_store_postgres.py --n 10000 --concurrency 500
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.postgres import PostgresTaskStore
from chongming.stores.postgres.dsn import redact_dsn
from chongming.stores.postgres.rows import COLUMN_INDEX, full_params, transition_rows
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS
from chongming.testing.store_contract import make_snapshot, next_step

_TAGS = COLUMN_INDEX["tags"]


def snapshot_params(snapshot: TaskSnapshot, limit: int | None) -> list[object]:
    """The store's own encoding of a row, with tags as the ``text[]`` a plain INSERT takes."""
    params: list[object] = list(full_params(snapshot, limit, None))
    params[_TAGS] = sorted(snapshot.tags)
    return params


PATH = (TaskStatus.QUEUED, TaskStatus.STARTING, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)


def trajectory(task_id: str) -> tuple[TaskSnapshot, list[tuple[TaskSnapshot, Transition]]]:
    first = make_snapshot(task_id, created_at=datetime.now(UTC), updated_at=datetime.now(UTC))
    steps = []
    current = first
    for status in PATH:
        current, transition = next_step(current, status)
        steps.append((current, transition))
    return first, steps


async def run_store(dsn: str, n: int, concurrency: int, **options: object) -> tuple[float, str]:
    schema = f"chongming_bench_{secrets.token_hex(4)}"
    store = PostgresTaskStore(dsn, schema=schema, application_name="chongming_bench", **options)
    plans = [trajectory(f"task-{i:06d}") for i in range(n)]
    try:
        await store.open()
        queue = iter(plans)

        async def worker() -> None:
            for first, steps in queue:
                await store.create(first)
                previous = first
                for snapshot, transition in steps:
                    await store.save(snapshot, previous.status_version, [transition])
                    previous = snapshot

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        stats = store.statistics()
        detail = (
            f"{stats.batched_writes} writes in {stats.batches} batches "
            f"(mean {stats.batched_writes / max(1, stats.batches):.1f})"
        )
        await _check(store, n)
    finally:
        await store.close()
        await _drop(dsn, schema)
    return elapsed, detail


async def _check(store: PostgresTaskStore, n: int) -> None:
    last = await store.get(f"task-{n - 1:06d}")
    assert last is not None
    assert last.status is TaskStatus.SUCCEEDED
    assert len(await store.history(f"task-{n - 1:06d}")) == 4


async def run_raw(dsn: str, n: int, batch: int) -> float:
    import asyncpg  # type: ignore[import-untyped]

    schema = f"chongming_bench_{secrets.token_hex(4)}"
    store = PostgresTaskStore(dsn, schema=schema, application_name="chongming_bench")
    await store.open()  # the same tables and indexes
    await store.close()
    plans = [trajectory(f"task-{i:06d}") for i in range(n)]
    names = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)
    marks = ", ".join(f"${i + 1}" for i in range(len(SNAPSHOT_COLUMNS)))
    insert_task = f'INSERT INTO "{schema}".tasks ({names}) VALUES ({marks})'
    insert_transition = (
        f'INSERT INTO "{schema}".transitions (task_id, version, from_status, to_status, at,'
        " trigger, actor, reason, attempt) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
    )
    task_rows = [snapshot_params(steps[-1][0], None) for _, steps in plans]
    all_transitions: list[tuple[object, ...]] = []
    for _, steps in plans:
        all_transitions.extend(transition_rows([t for _, t in steps]))
    conn = await asyncpg.connect(dsn, server_settings={"application_name": "chongming_bench"})
    try:
        started = time.perf_counter()
        for start in range(0, n, batch):
            async with conn.transaction():
                await conn.executemany(insert_task, task_rows[start : start + batch])
                await conn.executemany(
                    insert_transition, all_transitions[start * 4 : (start + batch) * 4]
                )
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
        await _drop(dsn, schema)
    return elapsed


async def run_raw_steps(dsn: str, n: int, batch: int) -> float:
    import asyncpg

    schema = f"chongming_bench_{secrets.token_hex(4)}"
    store = PostgresTaskStore(dsn, schema=schema, application_name="chongming_bench")
    await store.open()
    await store.close()
    plans = [trajectory(f"task-{i:06d}") for i in range(n)]
    names = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)
    marks = ", ".join(f"${i + 1}" for i in range(len(SNAPSHOT_COLUMNS)))
    sets = ", ".join(
        f"{name} = ${i + 1}" for i, (name, _) in enumerate(SNAPSHOT_COLUMNS) if name != "task_id"
    )
    insert_task = f'INSERT INTO "{schema}".tasks ({names}) VALUES ({marks})'
    update_task = (
        f'UPDATE "{schema}".tasks SET {sets}'
        f" WHERE task_id = $1 AND status_version = ${len(SNAPSHOT_COLUMNS) + 1}"
    )
    insert_transition = (
        f'INSERT INTO "{schema}".transitions (task_id, version, from_status, to_status, at,'
        " trigger, actor, reason, attempt) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        " ON CONFLICT (task_id, version) DO NOTHING"
    )
    conn = await asyncpg.connect(dsn, server_settings={"application_name": "chongming_bench"})
    try:
        started = time.perf_counter()
        for start in range(0, n, batch):
            chunk = plans[start : start + batch]
            async with conn.transaction():
                await conn.executemany(insert_task, [snapshot_params(f, None) for f, _ in chunk])
                for step in range(len(PATH)):
                    await conn.executemany(
                        update_task,
                        [
                            [*snapshot_params(s[step][0], None), s[step][0].status_version - 1]
                            for _, s in chunk
                        ],
                    )
                    await conn.executemany(
                        insert_transition,
                        [transition_rows([s[step][1]])[0] for _, s in chunk],
                    )
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
        await _drop(dsn, schema)
    return elapsed


async def _drop(dsn: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="tasks (4 transitions each)")
    parser.add_argument("--concurrency", type=int, default=500, help="asyncio tasks writing")
    parser.add_argument("--batch", type=int, default=1_000, help="tasks per raw transaction")
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--no-group-commit", action="store_true", help="also run without it")
    args = parser.parse_args(argv)
    transitions = args.n * len(PATH)
    print(f"PostgreSQL {redact_dsn(args.dsn)}; N={args.n} tasks, {transitions} transitions")

    raw = transitions / await run_raw(args.dsn, args.n, args.batch)
    steps = transitions / await run_raw_steps(args.dsn, args.n, args.batch)
    print(f"raw executemany, final rows:   {raw:9.0f} transitions/s")
    print(f"raw executemany, same writes:  {steps:9.0f} transitions/s")
    elapsed, detail = await run_store(args.dsn, args.n, args.concurrency)
    rate = transitions / elapsed
    print(f"PostgresTaskStore (group commit): {rate:6.0f} transitions/s ({elapsed:.2f}s; {detail})")
    print(f"  ratio vs final rows:  {rate / raw:.2f}x")
    print(f"  ratio vs same writes: {rate / steps:.2f}x")
    if args.no_group_commit:
        elapsed, _ = await run_store(args.dsn, args.n, args.concurrency, group_commit=False)
        plain = transitions / elapsed
        print(
            f"PostgresTaskStore (one statement per call): {plain:6.0f} transitions/s"
            f" ({elapsed:.2f}s; {plain / raw:.2f}x final rows, {plain / steps:.2f}x same writes)"
        )


def main(argv: list[str] | None = None) -> None:
    asyncio.run(run(argv))


if __name__ == "__main__":
    main()
