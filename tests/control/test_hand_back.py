"""A deploy loses no durable work (issue 22): a closing worker hands back what it claimed.

Two workers on one store. The first is closed (``close(grace)``, as SIGTERM
does) while it runs durable tasks: they go back to the queue, the second
resumes them, and every recorded step ran once. A non-durable task with an
attempt left is handed back the same way once it really stopped; one
without is ``stopped`` as before. A claimed task waiting out a retry
backoff goes back at once, claimable when the retry is due.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from chongming import Controller, ExponentialBackoff, InMemoryTaskStore, RetryPolicy, TaskStatus
from chongming.state.triggers import Trigger
from tests.conftest import FAST

RAN: Counter[str] = Counter()


def _worker(db: Path, owner: str) -> Controller:
    return Controller(
        store=db, owner=owner, work=True, poll_interval=0.05, windows=FAST, reconcile_interval=60
    )


async def _until(check: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)


async def test_closing_a_worker_hands_its_durable_tasks_to_another(tmp_path: Path) -> None:
    """Was: ``stopped`` for good on a clean close, while a SIGKILL resumed them."""
    RAN.clear()
    gate = asyncio.Event()  # set once the first worker is closed: only the second gets past

    async def first(task: str) -> str:
        RAN[f"first:{task}"] += 1
        return task

    async def second(task: str) -> str:
        RAN[f"second:{task}"] += 1
        return task

    async def order(ctx: Any, task: str) -> Any:
        await ctx.step("first", first, task)
        await gate.wait()  # the work between two steps: cancelled on the closing worker
        return await ctx.step("second", second, task)

    db = tmp_path / "q.db"
    ids = [f"o-{n}" for n in range(3)]
    a, b = _worker(db, "w-a"), _worker(db, "w-b")
    for node in (a, b):
        node.register("order", order, durable=True)
    async with Controller(store=db, owner="client") as client, a:
        queued = [await client.enqueue("order", task_id, task_id=task_id) for task_id in ids]

        async def all_waiting() -> bool:
            return sum(RAN.values()) == len(ids)

        await _until(all_waiting)
        async with b:
            await a.close(grace=0.1)
            gate.set()
            outcomes = [await q.wait(timeout=20) for q in queued]
            histories = [await client.history(task_id) for task_id in ids]
    assert [o.status for o in outcomes] == [TaskStatus.SUCCEEDED] * len(ids)
    assert Counter({f"{step}:{t}": 1 for t in ids for step in ("first", "second")}) == RAN
    for history in histories:
        triggers = [t.trigger for t in history]
        assert Trigger.HANDED_BACK in triggers
        assert TaskStatus.STOPPED not in [t.to_status for t in history]
    assert {o.owner for o in outcomes} == {"w-b"}
    # A hand-back is no retry: the replay on w-b continues attempt 1 of 1.
    assert [o.attempt for o in outcomes] == [1] * len(ids)


async def test_a_task_with_an_attempt_left_is_handed_back_once_it_stopped(
    tmp_path: Path,
) -> None:
    """A plain task ends its attempt at its checkpoint, then goes to the other worker."""
    attempts: list[tuple[str, int]] = []

    async def chore(ctx: Any) -> str:
        attempts.append((ctx.task_id, ctx.attempt))
        if ctx.attempt == 1:
            while True:  # honours the stop at its checkpoint
                await ctx.checkpoint()
                await asyncio.sleep(0.01)
        return "done"

    db = tmp_path / "q.db"
    a, b = _worker(db, "w-a"), _worker(db, "w-b")
    for node in (a, b):
        node.register("retried", chore, retry=RetryPolicy(max_attempts=2))
        node.register("once", chore)
    async with Controller(store=db, owner="client") as client, a:
        retried = await client.enqueue("retried", task_id="r-1")
        once = await client.enqueue("once", task_id="o-1")

        async def both_running() -> bool:
            return len(attempts) == 2

        await _until(both_running)
        async with b:
            await a.close(grace=0.05)
            handed = await retried.wait(timeout=20)
            stopped = await once.wait(timeout=20)
            history = await client.history("r-1")
    assert (handed.status, handed.owner, handed.attempt) == (TaskStatus.SUCCEEDED, "w-b", 2)
    assert stopped.status is TaskStatus.STOPPED  # no attempt left: stopped, as before
    moves = [(t.to_status, t.trigger) for t in history]
    assert (TaskStatus.RETRY_WAIT, Trigger.SHUTDOWN) in moves
    # It runs again from the start on w-b: that is its retry (attempt 2 of 2).
    assert (TaskStatus.QUEUED, Trigger.RETRY_RELEASED) in moves


async def test_a_claimed_retry_wait_goes_back_at_once_and_runs_when_due(tmp_path: Path) -> None:
    """Was: ``retry_wait -> stopped`` on close, the granted retry never ran."""
    calls: list[int] = []

    async def flaky(ctx: Any) -> Any:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ValueError("first try fails")
        return ctx.attempt

    policy = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.5, jitter=0.0))
    db = tmp_path / "q.db"
    a, b = _worker(db, "w-a"), _worker(db, "w-b")
    for node in (a, b):
        node.register("flaky", flaky, retry=policy)
    async with Controller(store=db, owner="client") as client, a:
        queued = await client.enqueue("flaky", task_id="f-1")

        async def waiting() -> bool:
            return (await a.get("f-1")).status is TaskStatus.RETRY_WAIT

        await _until(waiting)
        await a.close(grace=5.0)
        stored = await queued.get()
        async with b:
            final = await queued.wait(timeout=20)
    assert (stored.status, stored.owner) == (TaskStatus.QUEUED, None)
    assert stored.not_before is not None  # claimable when the retry is due, not before
    assert (final.status, final.owner, final.result) == (TaskStatus.SUCCEEDED, "w-b", 2)
    assert calls == [1, 2]


async def test_a_step_thread_running_at_hand_back_is_waited_for_first(tmp_path: Path) -> None:
    """The next worker starts the step's body only after the old thread returned."""
    lock = threading.Lock()
    live, peak, runs = 0, 0, 0
    release = threading.Event()

    def body() -> int:
        nonlocal live, peak, runs
        with lock:
            live, runs = live + 1, runs + 1
            peak = max(peak, live)
        try:
            if runs == 1:
                release.wait(10)
        finally:
            with lock:
                live -= 1
        return runs

    async def job(ctx: Any) -> Any:
        return await ctx.step("body", body)

    db = tmp_path / "q.db"
    a, b = _worker(db, "w-a"), _worker(db, "w-b")
    for node in (a, b):
        node.register("job", job, durable=True)
    async with Controller(store=db, owner="client") as client, a:
        queued = await client.enqueue("job", task_id="j-1")

        async def started() -> bool:
            return runs == 1

        await _until(started)
        async with b:
            # Ends 0.1 s into the hand-back, within its stop_grace (0.3 s).
            asyncio.get_running_loop().call_later(0.15, release.set)
            await a.close(grace=0.05)
            final = await queued.wait(timeout=20)
    assert (final.status, final.owner, final.result) == (TaskStatus.SUCCEEDED, "w-b", 2)
    assert (runs, peak) == (2, 1)


async def test_a_step_that_ran_while_its_worker_closed_is_recorded_not_run_again() -> None:
    """Was: the close cancelled the step's record write, so the next worker ran the body again."""
    store = InMemoryTaskStore()
    writing = asyncio.Event()
    record_step = store.record_step
    ran: Counter[str] = Counter()

    async def slow_record(*args: Any, **kwargs: Any) -> Any:
        writing.set()  # the body has returned; its record is on its way
        await asyncio.sleep(0.2)
        return await record_step(*args, **kwargs)

    async def charge(key: str) -> str:
        ran[key] += 1
        return key

    async def order(ctx: Any, key: str) -> Any:
        return await ctx.step("charge", charge, key)

    a = Controller(store=store, owner="w-a", work=True, poll_interval=0.02, windows=FAST)
    b = Controller(store=store, owner="w-b", work=True, poll_interval=0.02, windows=FAST)
    for node in (a, b):
        node.register("order", order, durable=True)
    store.record_step = slow_record  # type: ignore[method-assign]
    async with Controller(store=store, owner="client", poll_interval=0.02) as client, a:
        queued = await client.enqueue("order", "o-1", task_id="o-1")
        await writing.wait()
        store.record_step = record_step  # type: ignore[method-assign]
        async with b:
            await a.close(grace=0.0)  # cancels the task during the write
            outcome = await queued.wait(timeout=20)
            history = await client.history("o-1")
    assert (outcome.status, outcome.result, outcome.owner) == (TaskStatus.SUCCEEDED, "o-1", "w-b")
    assert Trigger.HANDED_BACK in [t.trigger for t in history]
    assert ran == Counter({"o-1": 1})
