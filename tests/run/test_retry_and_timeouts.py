"""Attempts, backoff and the three timeouts (the earliest wins)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from chongming import (
    ControlWindows,
    ExponentialBackoff,
    FailureKind,
    RetryPolicy,
    TaskContext,
    TaskRun,
    TaskStatus,
    Timeout,
    run_task,
)
from chongming.run.host import HostedRun, StandaloneHost
from tests.support import assert_sound, trajectory, wait_status

S = TaskStatus
QUICK = ExponentialBackoff(base=0.01, factor=2, max_delay=0.05)
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)


async def test_succeeds_on_the_third_attempt() -> None:
    calls = 0

    def flaky(ctx) -> str:  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError(f"attempt {calls} failed")
        return f"attempt {ctx.attempt} succeeded"

    async with TaskRun(flaky, retry=RetryPolicy(max_attempts=5, backoff=QUICK)) as run:
        outcome = await run.wait(5)
    assert (outcome.status, outcome.value, outcome.attempts) == (
        S.SUCCEEDED,
        "attempt 3 succeeded",
        3,
    )
    assert outcome.failure is None
    steps = trajectory(run)
    assert steps.count(("running", "retry_wait", "runtime:retry_scheduled")) == 2
    assert steps.count(("retry_wait", "queued", "runtime:retry_due")) == 2
    assert [t.attempt for t in run.transitions if t.to_status is S.STARTING] == [1, 2, 3]
    assert_sound(run)


async def test_budget_exhausted() -> None:
    def always(ctx) -> None:  # type: ignore[no-untyped-def]
        raise ValueError("bad row")

    outcome = await run_task(always, retry=RetryPolicy(max_attempts=2, backoff=QUICK))
    assert (outcome.status, outcome.attempts) == (S.FAILED, 2)
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.exception_type) == (
        FailureKind.EXCEPTION,
        "ValueError",
    )
    assert outcome.failure.message == "bad row"


async def test_retry_on_filters() -> None:
    def wrong(ctx) -> None:  # type: ignore[no-untyped-def]
        raise KeyError("not retryable here")

    outcome = await run_task(
        wrong, retry=RetryPolicy(max_attempts=5, backoff=QUICK, retry_on=(OSError,))
    )
    assert (outcome.status, outcome.attempts) == (S.FAILED, 1)


class CountingHost(StandaloneHost):
    def __init__(self) -> None:
        super().__init__()
        self.holding = 0
        self.peak_during_wait = -1

    def enqueue(self, run: HostedRun) -> None:
        self.holding += 1
        super().enqueue(run)

    def release(self, run: HostedRun) -> None:
        self.holding -= 1
        if run.status is S.RETRY_WAIT:
            self.peak_during_wait = self.holding


async def test_retry_wait_releases_the_slot() -> None:
    host = CountingHost()

    def fail_once(ctx) -> int:  # type: ignore[no-untyped-def]
        if ctx.attempt == 1:
            raise RuntimeError("x")
        return 1

    run = TaskRun(fail_once, retry=RetryPolicy(max_attempts=2, backoff=QUICK), host=host)
    run.submit()
    outcome = await run.wait(5)
    await host.aclose(1)
    assert outcome.ok
    assert host.peak_during_wait == 0
    assert host.holding == 0


async def test_per_attempt_timeout_is_a_retryable_failure_kind() -> None:
    async def slow(ctx) -> None:  # type: ignore[no-untyped-def]
        await asyncio.sleep(30)

    outcome = await run_task(slow, timeout=Timeout(per_attempt=0.1))
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (FailureKind.TIMEOUT_ATTEMPT, True)


async def test_timeout_then_retry_then_success() -> None:
    async def slow_first(ctx: TaskContext) -> int:
        if ctx.attempt == 1:
            await asyncio.sleep(30)
        return ctx.attempt

    outcome = await run_task(
        slow_first,
        timeout=Timeout(per_attempt=0.1),
        retry=RetryPolicy(max_attempts=2, backoff=QUICK),
    )
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, 2)


async def test_idle_timeout_catches_a_task_that_stops_checkpointing() -> None:
    async def stalls(ctx) -> None:  # type: ignore[no-untyped-def]
        for _ in range(3):
            await ctx.checkpoint()
            ctx.progress(1)  # progress alone does not count as a heartbeat
        await asyncio.sleep(30)

    outcome = await run_task(stalls, timeout=Timeout(per_attempt=20, idle=0.1))
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE


async def test_checkpoints_keep_the_idle_timeout_away() -> None:
    async def steady(ctx) -> str:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            await ctx.checkpoint()
            await asyncio.sleep(0.01)
        return "ok"

    outcome = await run_task(steady, timeout=Timeout(idle=0.15))
    assert outcome.ok


async def test_thread_timeout_stops_cooperatively() -> None:
    def loops(ctx) -> None:  # type: ignore[no-untyped-def]
        while True:
            ctx.checkpoint()
            time.sleep(0.005)

    outcome = await run_task(loops, timeout=Timeout(per_attempt=0.1), windows=FAST)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT


async def test_thread_that_cannot_be_timed_out_is_lost(
    release_threads: list[threading.Event],
) -> None:
    hold = threading.Event()
    release_threads.append(hold)

    def stuck(ctx) -> None:  # type: ignore[no-untyped-def]
        hold.wait(10)

    outcome = await run_task(
        stuck,
        timeout=Timeout(per_attempt=0.05),
        retry=RetryPolicy(max_attempts=3, backoff=QUICK),
        windows=FAST,
    )
    # A second attempt while the first may still run would be two live attempts.
    assert (outcome.status, outcome.attempts) == (S.LOST, 1)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LOST
    assert "timed out" in outcome.failure.message


class HoldingHost(StandaloneHost):
    """Never grants a slot, like a full admission queue."""

    def enqueue(self, run: HostedRun) -> None:
        pass


async def test_start_timeout_while_queued() -> None:
    host = HoldingHost()
    run = TaskRun(lambda ctx: None, timeout=Timeout(start=0.05), host=host)
    run.submit()
    outcome = await run.wait(5)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (FailureKind.TIMEOUT_START, False)
    assert trajectory(run)[-1] == ("queued", "failed", "scheduler:start_timeout")
    assert outcome.attempts == 0


async def test_start_timeout_does_not_fire_once_started() -> None:
    async def job(ctx) -> str:  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.15)
        return "ok"

    outcome = await run_task(job, timeout=Timeout(start=0.05))
    assert outcome.ok


async def test_paused_time_does_not_count_toward_timeouts() -> None:
    async def loops(ctx) -> str:  # type: ignore[no-untyped-def]
        for _ in range(20):
            await ctx.checkpoint()
            await asyncio.sleep(0.005)
        return "finished"

    async with TaskRun(loops, timeout=Timeout(per_attempt=0.4, idle=0.2), windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        assert await run.pause()
        await asyncio.sleep(0.5)  # longer than both limits, but paused
        assert run.status is S.PAUSED
        assert await run.resume()
        outcome = await run.wait(5)
    assert outcome.ok


async def test_stop_during_retry_wait_is_immediate() -> None:
    def fails(ctx) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("x")

    slow = ExponentialBackoff(base=30, max_delay=30)
    async with TaskRun(fails, retry=RetryPolicy(max_attempts=3, backoff=slow)) as run:
        await wait_status(run, S.RETRY_WAIT)
        assert await run.stop(reason="give up")
        assert run.status is S.STOPPED
    assert trajectory(run)[-1] == ("retry_wait", "stopped", "user:stop")


@pytest.mark.parametrize("status", [S.QUEUED])
async def test_stop_while_queued(status: TaskStatus) -> None:
    host = HoldingHost()
    run = TaskRun(lambda ctx: None, host=host)
    run.submit()
    assert run.status is status
    assert await run.stop()
    assert (await run.wait(1)).status is S.STOPPED
    assert trajectory(run)[-1] == ("queued", "stopped", "user:stop")
