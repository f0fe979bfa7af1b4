"""Facts: set-once values sent to a durable task, never lost, decided once (fact or timeout)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, ExponentialBackoff, RetryPolicy, TaskStatus
from chongming.errors import FactConflict, FactTimeout, PayloadError, TaskNotFound
from tests.conftest import FAST
from tests.control.test_durable import _plant_dead_attempt

RETRY_ONCE = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
SEEN: list[Any] = []
WAITING = asyncio.Event()


class Flaky(Exception):
    pass


async def waits(ctx: Any, timeout: float | None = None) -> Any:
    WAITING.set()
    return await ctx.wait_for_fact("downloaded", timeout=timeout, poll_interval=0.02)


async def times_out_then_retries(ctx: Any) -> str:
    try:
        await ctx.wait_for_fact("downloaded", timeout=0.1, poll_interval=0.02)
    except FactTimeout as error:
        SEEN.append(f"attempt {ctx.attempt}: {error}")
    if ctx.attempt == 1:
        await ctx.step("signal-now", _signal_now, ctx.task_id)
        raise Flaky("retry me")
    return "done"


CLIENT: list[Controller] = []


async def _signal_now(task_id: str) -> bool:
    return await CLIENT[0].signal(task_id, "downloaded", {"bytes": 9})


def _worker(db: Path, **options: Any) -> Controller:
    worker = Controller(
        store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST, **options
    )
    worker.register("waits", waits, durable=True)
    worker.register("times_out", times_out_then_retries, durable=True, retry=RETRY_ONCE)
    return worker


@pytest.fixture(autouse=True)
def _fresh() -> None:
    SEEN.clear()
    WAITING.clear()
    CLIENT.clear()


async def test_a_fact_sent_before_the_task_runs_is_there_when_it_waits(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        early = await client.enqueue("waits", task_id="e-1", facts={"downloaded": [1, 2]})
        late = await client.enqueue("waits", task_id="e-2")
        assert await client.signal("e-2", "downloaded", "ok", key="hook-1") is True
        async with _worker(db):
            finals = [await early.wait(timeout=20), await late.wait(timeout=20)]
        facts = await client.facts("e-2")
    assert [f.result for f in finals] == [[1, 2], "ok"]
    assert [(f.name, f.payload, f.key) for f in facts] == [("downloaded", "ok", "hook-1")]


async def test_a_fact_sent_while_the_task_waits_wakes_it(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("waits", task_id="w-1")
        async with _worker(db):
            await asyncio.wait_for(WAITING.wait(), 20)  # it is in wait_for_fact now
            assert await client.signal("w-1", "downloaded", {"path": "/data/a"})
            final = await queued.wait(timeout=20)
    assert final.result == {"path": "/data/a"}


async def test_a_fact_that_comes_between_the_look_and_the_wait_is_not_lost(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    looks: list[int] = []

    async def sends_after_first_look(ctx: Any) -> Any:
        async def check() -> None:
            looks.append(1)
            if len(looks) == 1:  # right after the store said "not yet", before the wait
                await CLIENT[0].signal(ctx.task_id, "downloaded", "just in time")

        return await ctx.wait_for_fact("downloaded", check=check, poll_interval=0.05)

    async with Controller(store=db, owner="client") as client:
        CLIENT.append(client)
        queued = await client.enqueue("hooked", task_id="h-1")
        worker = _worker(db)
        worker.register("hooked", sends_after_first_look, durable=True)
        async with worker:
            final = await queued.wait(timeout=20)
    assert final.result == "just in time"
    assert len(looks) == 1  # the next look read the store and found it


async def test_timeout_is_decided_once_and_replayed_even_if_the_fact_comes_later(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        CLIENT.append(client)
        queued = await client.enqueue("times_out", task_id="t-1")
        async with _worker(db):
            final = await queued.wait(timeout=20)
        facts = await client.facts("t-1")
    assert final.status is TaskStatus.SUCCEEDED
    assert final.attempt == 2
    # The fact arrived between the attempts; the replay still answers "timeout".
    assert [f.payload for f in facts] == [{"bytes": 9}]
    assert SEEN == [
        "attempt 1: task 't-1' had no fact 'downloaded' within 0.1s",
        "attempt 2: task 't-1' had no fact 'downloaded' within 0.1s",
    ]


async def test_a_check_of_business_state_counts_as_the_fact(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    table: dict[str, str] = {}

    async def approved(ctx: Any) -> Any:
        return await ctx.wait_for_fact(
            "approved", check=lambda: table.get("order-7"), poll_interval=0.02
        )

    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("approved", task_id="a-1")
        worker = _worker(db)
        worker.register("approved", approved, durable=True)
        async with worker:
            await asyncio.sleep(0.1)
            table["order-7"] = "approved by alice"
            final = await queued.wait(timeout=20)
    assert final.result == "approved by alice"


async def test_signal_refuses_what_it_cannot_keep(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        await client.enqueue("waits", task_id="s-1")
        with pytest.raises(TaskNotFound):
            await client.signal("ghost", "downloaded", 1)
        assert await client.signal("s-1", "downloaded", 1) is True
        assert await client.signal("s-1", "downloaded", 1) is False
        with pytest.raises(FactConflict, match="already has fact 'downloaded'"):
            await client.signal("s-1", "downloaded", 2)
        for name in ("", "a\x00b", "x" * 10_000):
            with pytest.raises(PayloadError):
                await client.signal("s-1", name, 1)
        with pytest.raises(PayloadError):
            await client.signal("s-1", "blob", object())
        with pytest.raises(ConfigurationError, match="facts must be a mapping"):
            await client.enqueue("waits", task_id="s-2", facts=["downloaded"])  # type: ignore[arg-type]
        assert [f.name for f in await client.facts("s-1")] == ["downloaded"]
    with pytest.raises(ConfigurationError, match="signal needs a store"):
        await Controller().signal("s-1", "downloaded", 1)


async def test_a_fact_sent_while_no_worker_holds_the_task_is_found_by_the_resume(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    # Its worker died while it waited for the fact (the deadline step was recorded).
    await _plant_dead_attempt(
        db, "c-1", name="waits", args=(), steps_done=(("fact:downloaded:deadline", None),)
    )
    async with Controller(store=db, owner="client") as client:
        assert await client.signal("c-1", "downloaded", "sent during the crash")
    async with _worker(db, reconcile_interval=0.1) as worker:
        store = worker.store
        assert store is not None
        while not (await store.get("c-1")).is_terminal:  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        final = await store.get("c-1")
        history = await store.history("c-1")
    assert final is not None
    assert final.result == "sent during the crash"
    assert [t.trigger for t in history].count("reconcile:resumed") == 1
