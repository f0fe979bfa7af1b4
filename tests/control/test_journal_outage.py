"""A durable task's journal meets the store away for a moment: it waits, it does not fail.

Found by the store-restart proof (tests/cli/test_durable_store_restart.py):
every call the journal of a durable attempt made to the store — starting
the attempt, recording a step, an operation's intent and its commit, a look
for a fact — gave up after the store's own few quick retries, so a task
whose call met the server restarting ended ``failed`` (a retryable
``StoreUnavailable``), its recorded steps wasted, though each of those calls
is safe to repeat after an unknown outcome and the write-through waits
through the same outage. Each call here meets the store away twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, EffectInfo, TaskStatus
from chongming.errors import StoreUnavailable
from chongming.stores.sqlite import SqliteTaskStore
from tests.conftest import FAST


async def _value(n: int) -> int:
    return n


def _op(info: EffectInfo) -> str:
    return info.idempotency_key


async def journaled(ctx: Any) -> str:
    await ctx.step("a", _value, 1)
    await ctx.effect("op", _op)
    await ctx.wait_for_fact("f", timeout=30)  # sent with the enqueue: found at the first look
    return "done"


@pytest.mark.parametrize(
    "method",
    [
        "begin_durable_attempt",
        "steps",
        "record_step",
        "begin_effect",
        "finish_effect",
        "get_fact",
        "store_time",
    ],
)
async def test_a_journal_call_that_meets_the_store_away_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    real = getattr(SqliteTaskStore, method)
    failed: list[str] = []

    async def away_twice(store: SqliteTaskStore, *args: Any, **kwargs: Any) -> Any:
        if len(failed) < 2:
            failed.append(method)
            raise StoreUnavailable(f"{method}: the server is restarting")
        return await real(store, *args, **kwargs)

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client", poll_interval=0.05) as client:
        queued = await client.enqueue("journaled", task_id="j-1", facts={"f": 1})
        monkeypatch.setattr(SqliteTaskStore, method, away_twice)
        worker = Controller(store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST)
        worker.register("journaled", journaled, durable=True)
        async with worker:
            final = await queued.wait(timeout=10)
    assert failed == [method, method]  # the store was away for two calls
    assert (final.status, final.result) == (TaskStatus.SUCCEEDED, "done"), final.failure
