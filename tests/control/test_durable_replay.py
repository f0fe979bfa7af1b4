"""Unchanged code always replays: whatever order steps finished in, whatever was inserted.

A step records the step its flow of code called just before it; replay
checks that, not the order steps were recorded in (which is the order they
finished in). Each test runs a durable task through several attempts (each
but the last fails after its steps) on SQLite and PostgreSQL, and counts
how often each step body ran.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskStatus
from chongming.errors import NondeterminismError
from chongming.stores.base import TaskStore
from chongming.stores.durable import FIRST_CALL, StepRecord
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.sqlite.schema import MIGRATIONS
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]  # fixtures

ATTEMPTS = 4
RETRIES = RetryPolicy(max_attempts=ATTEMPTS, backoff=ExponentialBackoff(base=0.01))
RAN: Counter[str] = Counter()
ORDER: dict[int, list[str]] = {}


class Flaky(Exception):
    pass


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()
    ORDER.clear()


async def _body(name: str, after: asyncio.Event | None = None) -> str:
    """A step body; with ``after``, it finishes only once that event is set."""
    RAN[name] += 1
    if after is not None:
        await after.wait()
    return f"{name}-result"


def _fail_unless_last(ctx: Any) -> None:
    if ctx.attempt < ATTEMPTS:
        raise Flaky(f"attempt {ctx.attempt} dies after its steps")


async def gathered(ctx: Any) -> Any:
    """Two steps at once: "a" is called first and finishes last."""
    b_done = asyncio.Event()

    async def b() -> str:
        result = await _body("b")
        b_done.set()
        return result

    first = await asyncio.gather(ctx.step("a", _body, "a", b_done), ctx.step("b", b))
    results = [*first, await ctx.step("c", _body, "c")]
    _fail_unless_last(ctx)
    return results


async def flows(ctx: Any) -> Any:
    """Two flows of two steps each at once; the second flow's steps finish first."""
    y_done = asyncio.Event()

    async def flow(prefix: str, wait: asyncio.Event | None) -> list[str]:
        first = await ctx.step(f"{prefix}1", _body, f"{prefix}1", wait)
        second = await ctx.step(f"{prefix}2", _body, f"{prefix}2")
        if wait is None:
            y_done.set()
        return [first, second]

    results = await asyncio.gather(flow("x", y_done), flow("y", None))
    _fail_unless_last(ctx)
    return results


async def scripted(ctx: Any) -> Any:
    """Steps in the order ORDER gives for the attempt (the code "changes" between attempts)."""
    results = [await ctx.step(name, _body, name) for name in ORDER[ctx.attempt]]
    _fail_unless_last(ctx)
    return results


async def _submit(store: TaskStore | Path, name: str, fn: Any) -> Any:
    async with Controller(store=store, owner="w-1", windows=FAST) as controller:
        controller.register(name, fn, durable=True, retry=RETRIES)
        run = await controller.submit(name, task_id=f"{name}-1")
        await asyncio.wait_for(run.wait(), 30)
        final = await controller.get(f"{name}-1")
        assert controller.store is not None
        steps = await controller.store.steps(f"{name}-1")
    return final, steps


async def test_steps_gathered_at_once_replay_whatever_order_they_finished_in(
    where: object, stores: StoreMaker
) -> None:
    final, steps = await _submit(stores.make(where), "gathered", gathered)
    assert final.status is TaskStatus.SUCCEEDED, final.failure
    assert final.attempt == ATTEMPTS  # three attempts replayed the record
    assert final.result == ["a-result", "b-result", "c-result"]
    assert RAN == {"a": 1, "b": 1, "c": 1}
    # Recorded in the order they finished; each knows what its flow called before it.
    assert [(s.name, s.after) for s in steps] == [
        ("b", FIRST_CALL),
        ("a", FIRST_CALL),
        ("c", FIRST_CALL),
    ]


async def test_flows_of_steps_run_at_once_replay_whatever_order_they_finished_in(
    where: object, stores: StoreMaker
) -> None:
    final, steps = await _submit(stores.make(where), "flows", flows)
    assert final.status is TaskStatus.SUCCEEDED, final.failure
    assert final.attempt == ATTEMPTS
    assert final.result == [["x1-result", "x2-result"], ["y1-result", "y2-result"]]
    assert RAN == {"x1": 1, "x2": 1, "y1": 1, "y2": 1}
    assert [s.name for s in steps] == ["y1", "y2", "x1", "x2"]
    assert {s.name: s.after for s in steps}["x2"] == ("x1", 0)


async def test_an_inserted_step_replays_on_every_later_attempt(
    where: object, stores: StoreMaker
) -> None:
    # Attempt 1 ran the old code; attempts 2 to 4 run the new one, with "audit" inserted.
    ORDER.update({1: ["fetch", "load"], 2: ["fetch", "audit", "load"]})
    ORDER.update({3: ORDER[2], 4: ORDER[2]})
    final, steps = await _submit(stores.make(where), "scripted", scripted)
    assert final.status is TaskStatus.SUCCEEDED, final.failure
    assert final.attempt == ATTEMPTS
    assert RAN == {"fetch": 1, "audit": 1, "load": 1}
    assert [(s.name, s.after) for s in steps] == [
        ("fetch", FIRST_CALL),
        ("load", ("fetch", 0)),
        ("audit", ("fetch", 0)),
    ]


async def test_changed_order_fails_once_and_is_never_retried(
    where: object, stores: StoreMaker
) -> None:
    ORDER.update({1: ["fetch", "load"], 2: ["load", "fetch"], 3: ["load", "fetch"]})
    final, _ = await _submit(stores.make(where), "scripted", scripted)
    assert final.status is TaskStatus.FAILED
    assert final.attempt == 2  # not retried: every attempt of this code would fail alike
    assert final.failure is not None
    assert final.failure.exception_type == "NondeterminismError"
    assert final.failure.retryable is False
    assert "called step 'load' before 'fetch'" in final.failure.message
    assert RAN == {"fetch": 1, "load": 1}


async def test_a_swallowed_nondeterminism_error_is_raised_again_by_the_next_call(
    tmp_path: Path,
) -> None:
    seen: list[str] = []

    async def swallows(ctx: Any) -> Any:
        if ctx.attempt == 2:
            try:
                await ctx.step("load", _body, "load")
            except NondeterminismError:
                seen.append("swallowed")
            try:
                await ctx.step("fetch", _body, "fetch")
            except NondeterminismError:
                seen.append("raised again")
                raise
        else:
            await ctx.step("fetch", _body, "fetch")
            await ctx.step("load", _body, "load")
        _fail_unless_last(ctx)

    final, _ = await _submit(tmp_path / "q.db", "swallows", swallows)
    assert seen == ["swallowed", "raised again"]
    assert final.failure is not None
    assert final.failure.retryable is False


# -- journals recorded before schema 0009 ---------------------------------------------

_OLD_STEPS = (  # as chongming before 0009 recorded a gather: in finishing order, no "after"
    ("b", 0, 1, '"b-result"', 1, 1),
    ("a", 0, 1, '"a-result"', 2, 1),
)


def _sqlite_at_0008(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        for migration in MIGRATIONS[:8]:
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version VALUES (?, ?, 0)", (migration.version, migration.name)
            )
        for row in _OLD_STEPS:
            conn.execute(
                "INSERT INTO durable_steps (task_id, name, occurrence, ok, value, seq, epoch,"
                " recorded_at) VALUES ('old-1', ?, ?, ?, ?, ?, ?, 0)",
                row,
            )
    finally:
        conn.close()


async def test_a_journal_recorded_before_0009_migrates_and_reads_without_an_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    path.touch(mode=0o600)
    _sqlite_at_0008(path)
    async with SqliteTaskStore(path) as store:
        steps = await store.steps("old-1")
    assert [(s.name, s.value, s.after) for s in steps] == [
        ("b", "b-result", None),
        ("a", "a-result", None),
    ]


async def test_a_journal_recorded_before_0009_migrates_on_postgres() -> None:
    from chongming.stores.postgres import PostgresTaskStore
    from chongming.stores.postgres.schema import MIGRATIONS as PG_MIGRATIONS
    from tests.stores.pg_support import (
        admin_connection,
        drop_schema,
        fresh_name,
        require_postgres,
    )

    dsn = require_postgres()
    schema = fresh_name("old")
    quoted = f'"{schema}"'
    try:
        async with admin_connection() as conn:
            await conn.execute(f"CREATE SCHEMA {quoted}")
            await conn.execute(
                f"CREATE TABLE {quoted}.schema_version (version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
            for number, ddl in PG_MIGRATIONS[:8]:
                await conn.execute(ddl.replace("@schema", quoted))
                await conn.execute(f"INSERT INTO {quoted}.schema_version VALUES ($1)", number)
            for name, occurrence, ok, value, seq, epoch in _OLD_STEPS:
                await conn.execute(
                    f"INSERT INTO {quoted}.durable_steps (task_id, name, occurrence, ok, value,"
                    " seq, epoch) VALUES ('old-1', $1, $2, $3, $4::jsonb, $5, $6)",
                    name,
                    occurrence,
                    bool(ok),
                    value,
                    seq,
                    epoch,
                )
        async with PostgresTaskStore(dsn, schema=schema) as store:
            steps = await store.steps("old-1")
    finally:
        await drop_schema(schema)
    assert [(s.name, s.value, s.after) for s in steps] == [
        ("b", "b-result", None),
        ("a", "a-result", None),
    ]


async def test_a_gather_recorded_before_0009_replays_after_the_upgrade(
    where: object, stores: StoreMaker
) -> None:
    """Attempt 1 stands for the old chongming: its gather recorded in finishing order, no
    "after" (what migration 0009 leaves in old rows); attempts 2 to 4 run today's code."""

    async def upgraded(ctx: Any) -> Any:
        journal = ctx.journal
        if ctx.attempt > 1:
            return await gathered(ctx)
        for name in ("b", "a"):
            old = StepRecord(name=name, occurrence=0, ok=True, value=f"{name}-result")
            await journal._store.record_step(ctx.task_id, journal.epoch, old)
        raise Flaky("the old attempt died after its gather")

    final, steps = await _submit(stores.make(where), "upgraded", upgraded)
    assert final.status is TaskStatus.SUCCEEDED, final.failure
    assert final.attempt == ATTEMPTS
    assert RAN == {"c": 1}  # "a" and "b" replayed from the old record every time
    assert [(s.name, s.after) for s in steps] == [("b", None), ("a", None), ("c", FIRST_CALL)]


# -- step errors no store could keep as they are --------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this error cannot say what it is")


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (ValueError("row\x00seven"), "row\\x00seven"),
        (OSError("file \udce9.txt"), "file \\udce9.txt"),
        (Unprintable(), "<str() of the error raised RuntimeError>"),
    ],
    ids=["nul", "lone-surrogate", "str-raises"],
)
async def test_a_step_error_any_message_is_recorded_and_replayed(
    where: object, stores: StoreMaker, error: Exception, message: str
) -> None:
    seen: list[tuple[str, str]] = []

    def breaks() -> None:  # a plain function: its error crosses a thread too
        RAN["breaks"] += 1
        raise error

    async def step_breaks(ctx: Any) -> None:
        from chongming.errors import StepFailed

        try:
            await ctx.step("breaks", breaks)
        except StepFailed as failed:
            seen.append((failed.error_type, failed.message))
        _fail_unless_last(ctx)

    final, steps = await _submit(stores.make(where), "step_breaks", step_breaks)
    assert final.status is TaskStatus.SUCCEEDED, final.failure
    assert RAN == {"breaks": 1}  # recorded once, replayed by the three later attempts
    assert seen == [(type(error).__name__, message)] * ATTEMPTS
    assert [(s.ok, s.value) for s in steps] == [
        (False, {"type": type(error).__name__, "message": message})
    ]
