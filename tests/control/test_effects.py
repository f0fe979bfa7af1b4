"""``ctx.effect``: an operation ledger; a commit in the store's database happens exactly once."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from chongming import (
    Controller,
    EffectInfo,
    ExponentialBackoff,
    FencingError,
    RetryPolicy,
    TaskStatus,
)
from tests.conftest import FAST

RETRY = RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(base=0.01))
CALLS: Counter[str] = Counter()
INFOS: list[EffectInfo] = []


class Flaky(Exception):
    pass


def _table(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS charges (task_id TEXT, op TEXT, amount INTEGER)")


def _charges(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT task_id, op, amount FROM charges ORDER BY op").fetchall()


async def charge(info: EffectInfo, amount: int) -> dict[str, Any]:
    CALLS[info.idempotency_key] += 1
    INFOS.append(info)
    return {"amount": amount, "receipt": f"r-{info.idempotency_key}"}


def record_charge(conn: sqlite3.Connection, result: dict[str, Any]) -> None:
    # In the store's own transaction, beside the ledger row and the fencing check.
    task_id, op = result["receipt"][2:].split(":", 1)
    conn.execute(
        "INSERT INTO charges (task_id, op, amount) VALUES (?, ?, ?)",
        (task_id, op, result["amount"]),
    )


async def bills(ctx: Any) -> list[Any]:
    first = await ctx.effect("charge:1", charge, 10, commit=record_charge)
    if ctx.attempt == 1:
        raise Flaky("the network dropped after the first charge")
    second = await ctx.effect("charge:2", charge, 20, commit=record_charge)
    return [first, second]


async def _run(db: Path, name: str, fn: Any, task_id: str) -> Any:
    async with Controller(store=db, owner="client") as client:
        await asyncio.to_thread(_table, db)
        queued = await client.enqueue(name, task_id=task_id)
        worker = Controller(store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST)
        worker.register(name, fn, durable=True, retry=RETRY)
        async with worker:
            return await queued.wait(timeout=20)


async def test_a_retry_gets_the_recorded_result_and_the_business_row_exists_once(
    tmp_path: Path,
) -> None:
    CALLS.clear()
    db = tmp_path / "q.db"
    final = await _run(db, "bills", bills, "b-1")
    assert final.status is TaskStatus.SUCCEEDED
    assert final.attempt == 2
    assert CALLS == {"b-1:charge:1": 1, "b-1:charge:2": 1}  # the retry did not charge again
    assert await asyncio.to_thread(_charges, db) == [
        ("b-1", "charge:1", 10),
        ("b-1", "charge:2", 20),
    ]


async def test_an_operation_left_without_a_result_tells_the_next_attempt(tmp_path: Path) -> None:
    INFOS.clear()

    async def half_done(info: EffectInfo) -> str:
        INFOS.append(info)
        if not info.resumed:
            raise Flaky("the upload went out, then the worker lost its answer")
        return "reconciled with the vendor"

    async def uploads(ctx: Any) -> Any:
        return await ctx.effect("upload", half_done)

    final = await _run(tmp_path / "q.db", "uploads", uploads, "u-1")
    assert final.status is TaskStatus.SUCCEEDED
    assert final.result == "reconciled with the vendor"
    assert [(i.idempotency_key, i.resumed) for i in INFOS] == [
        ("u-1:upload", False),
        ("u-1:upload", True),
    ]


async def test_a_replaced_attempt_commits_nothing(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    go = asyncio.Event()
    seen: list[str] = []

    async def slow_charge(info: EffectInfo) -> dict[str, Any]:
        await go.wait()  # meanwhile another attempt takes the epoch
        return {"amount": 5, "receipt": f"r-{info.idempotency_key}"}

    async def fenced(ctx: Any) -> None:
        try:
            await ctx.effect("charge:1", slow_charge, commit=record_charge)
        except FencingError as error:
            seen.append(type(error).__name__)
            raise

    async with Controller(store=db, owner="client") as client:
        await asyncio.to_thread(_table, db)
        queued = await client.enqueue("fenced", task_id="f-1")
        worker = Controller(store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST)
        worker.register("fenced", fenced, durable=True)
        async with worker:
            store = worker.store
            assert store is not None
            while not await store.durable_runs(["f-1"]):
                await asyncio.sleep(0.01)
            # A newer attempt takes the epoch (before or after the intent: either way
            # the old attempt's next ledger write is refused).
            await store.begin_durable_attempt("f-1", "w-1", max_resumes=3)
            go.set()
            final = await queued.wait(timeout=20)
    assert seen == ["FencingError"]
    assert final.status is TaskStatus.FAILED
    assert await asyncio.to_thread(_charges, db) == []  # the commit never ran


async def test_an_async_commit_on_sqlite_is_refused_with_the_reason(tmp_path: Path) -> None:
    async def async_commit(conn: object, result: object) -> None:
        return None

    async def commits_async(ctx: Any) -> Any:
        return await ctx.effect("charge:1", charge, 1, commit=async_commit)

    final = await _run(tmp_path / "q.db", "commits_async", commits_async, "a-1")
    assert final.status is TaskStatus.FAILED
    assert final.failure is not None
    assert "pass a plain function, not a coroutine function" in final.failure.message
