"""A step's body has one live copy, and its end is told truthfully (issue 22, cases 3 and 4).

A durable task's plain-function step runs on a worker thread that cannot be
cancelled. Cancelling the task's coroutine (a stop after its grace, a
timeout) must not record ``stopped``, nor start the same body again while
that thread runs. And a ``SystemExit`` in a step fails the attempt, recorded,
without ending the loop.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskStatus, Timeout
from chongming.policies import ControlWindows
from tests.conftest import FAST

THREE = RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(base=0.01))


class Body:
    """A step body that holds its thread until released, counting live copies."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.lock = threading.Lock()
        self.live = 0
        self.peak = 0
        self.runs = 0
        self.finished = 0

    def __call__(self) -> int:
        with self.lock:
            self.live += 1
            self.runs += 1
            self.peak = max(self.peak, self.live)
        try:
            self.release.wait(10)
        finally:
            with self.lock:
                self.live -= 1
                self.finished += 1
        return 1


def _node(db: Path, windows: ControlWindows = FAST) -> Controller:
    return Controller(store=db, owner="w-1", work=True, poll_interval=0.05, windows=windows)


async def _enqueued_outcome(node: Controller, name: str) -> Any:
    queued = await node.enqueue(name, task_id="t-1")
    return await queued.wait(timeout=20)


async def test_a_timeout_never_lets_a_retry_run_a_step_beside_its_thread(
    tmp_path: Path, release_threads: list[threading.Event]
) -> None:
    """Was: three copies of one body at once, and ``failed`` (timeout) three times."""
    release = threading.Event()
    release_threads.append(release)
    body = Body(release)

    async def job(ctx: Any) -> Any:
        return await ctx.step("slow", body)

    async with _node(tmp_path / "s.db") as node:
        node.register("job", job, durable=True, retry=THREE, timeout=Timeout(per_attempt=0.2))
        outcome = await _enqueued_outcome(node, "job")
        release.set()
    assert outcome.status is TaskStatus.LOST, outcome
    assert outcome.failure is not None
    assert "step 'slow'" in outcome.failure.message
    assert "still running" in outcome.failure.message
    assert (body.runs, body.peak) == (1, 1)


async def test_a_timeout_waits_for_the_step_thread_then_retries(tmp_path: Path) -> None:
    """A step thread that ends within the grace: the retry starts after it, never beside it."""
    release = threading.Event()
    body = Body(release)
    attempts: list[int] = []

    async def job(ctx: Any) -> Any:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            # The timeout (0.1 s) fires first; the thread ends 0.2 s later, inside the grace.
            asyncio.get_running_loop().call_later(0.3, release.set)
        return await ctx.step("slow", body)

    windows = ControlWindows(stop_grace=5.0, cancel_window=0.3, pause_window=0.5)
    async with _node(tmp_path / "s.db", windows) as node:
        node.register("job", job, durable=True, retry=THREE, timeout=Timeout(per_attempt=0.1))
        outcome = await _enqueued_outcome(node, "job")
        history = await node.history("t-1")
    assert outcome.status is TaskStatus.SUCCEEDED, outcome
    assert attempts == [1, 2]
    assert (body.runs, body.peak) == (2, 1)  # one after the other
    assert [t.to_status for t in history].count(TaskStatus.RETRY_WAIT) == 1


async def test_a_stop_after_its_grace_is_not_stopped_while_the_step_runs(
    tmp_path: Path, release_threads: list[threading.Event]
) -> None:
    """Was: ``stopped``, while the thread went on and made its side effect later."""
    release = threading.Event()
    release_threads.append(release)
    body = Body(release)
    entered = asyncio.Event()

    async def job(ctx: Any) -> Any:
        entered.set()
        return await ctx.step("slow", body)

    async with _node(tmp_path / "s.db") as node:
        node.register("job", job, durable=True)
        queued = await node.enqueue("job", task_id="t-1")
        await entered.wait()
        while body.runs == 0:
            await asyncio.sleep(0.01)
        assert await node.stop("t-1")
        outcome = await queued.wait(timeout=10)
        release.set()
    assert outcome.status is TaskStatus.LOST, outcome
    assert outcome.failure is not None
    assert "grace" in outcome.failure.message
    assert "slow" in outcome.failure.message


async def test_a_stop_while_no_step_thread_runs_is_stopped(tmp_path: Path) -> None:
    """The truthful case stays as it was: a coroutine cancelled at an await is ``stopped``."""

    async def job(ctx: Any) -> Any:
        await ctx.step("quick", lambda: 1)
        await asyncio.sleep(30)

    async with _node(tmp_path / "s.db") as node:
        node.register("job", job, durable=True)
        queued = await node.enqueue("job", task_id="t-1")
        while (await node.get("t-1")).status is not TaskStatus.RUNNING:
            await asyncio.sleep(0.01)
        assert await node.stop("t-1")
        outcome = await queued.wait(timeout=10)
    assert outcome.status is TaskStatus.STOPPED, outcome


def _exits() -> None:
    sys.exit(3)


async def _exits_async() -> None:
    raise SystemExit(4)


@pytest.mark.parametrize("how", ["plain", "coroutine", "gathered-plain", "gathered-coroutine"])
async def test_system_exit_in_a_step_fails_the_attempt_and_keeps_the_loop(
    tmp_path: Path, how: str
) -> None:
    """Was: the worker went down (the loop ended) and the process hung."""

    async def job(ctx: Any) -> Any:
        fn = _exits if how.endswith("plain") else _exits_async
        if how.startswith("gathered"):
            return await asyncio.gather(ctx.step("other", lambda: 1), ctx.step("exit", fn))
        return await ctx.step("exit", fn)

    async def after(ctx: Any) -> int:
        return 7

    async with _node(tmp_path / "s.db") as node:
        node.register("job", job, durable=True, retry=THREE)
        node.register("after", after)
        outcome = await _enqueued_outcome(node, "job")
        later = await (await node.enqueue("after", task_id="t-2")).wait(timeout=10)
        store = node.store
        assert store is not None
        steps = await store.steps("t-1")
    assert outcome.status is TaskStatus.FAILED, outcome
    assert outcome.failure is not None
    assert outcome.failure.exception_type == "SystemExit"
    assert outcome.failure.retryable is False
    assert outcome.attempt == 1
    assert "exit" not in {step.name for step in steps}  # not the step's outcome: not recorded
    assert later.status is TaskStatus.SUCCEEDED


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
async def test_a_base_exception_of_an_async_task_fails_it_and_keeps_the_loop(
    tmp_path: Path, error: BaseException
) -> None:
    """Was: a coroutine's SystemExit was re-raised into the loop (the worker hung, running)."""

    async def job(ctx: Any) -> None:
        raise error

    async with _node(tmp_path / "s.db") as node:
        node.register("job", job, retry=THREE)
        outcome = await _enqueued_outcome(node, "job")
        again = await node.submit("job", task_id="t-2")
        second = await again.wait(timeout=10)
    assert outcome.status is TaskStatus.FAILED, outcome
    assert outcome.failure is not None
    assert outcome.failure.exception_type == type(error).__name__
    assert (outcome.failure.retryable, outcome.attempt) == (False, 1)
    assert second.status is TaskStatus.FAILED  # and the loop still runs tasks
