"""Timeouts, grace and pause windows on virtual time (the ``looptime`` plugin).

The runtime reads durations only on the loop's clock, the clock its timers
run on, so a virtual-time loop moves them together: production-sized windows
(minutes) are checked in milliseconds, immune to a loaded machine. A module
that read ``time.monotonic()`` directly would break these tests.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from chongming import (
    Controller,
    FailureKind,
    TaskRun,
    TaskStatus,
    Timeout,
    run_task,
)
from chongming.policies import ControlWindows
from chongming.state.triggers import Trigger
from tests.support import trajectory

pytestmark = pytest.mark.looptime
S = TaskStatus


def _now() -> float:
    return asyncio.get_running_loop().time()


async def test_a_ten_minute_attempt_timeout_fires_at_ten_minutes() -> None:
    async def sleepy(ctx: Any) -> None:
        await asyncio.sleep(3600)

    wall, start = time.monotonic(), _now()
    outcome = await run_task(sleepy, timeout=Timeout(per_attempt=600))
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    assert 600 <= _now() - start < 601 + ControlWindows().cancel_window
    assert time.monotonic() - wall < 10  # virtual: nobody waited ten minutes


async def test_the_idle_timeout_counts_from_the_last_checkpoint() -> None:
    last: list[float] = []

    async def goes_quiet(ctx: Any) -> None:
        for _ in range(10):
            await ctx.checkpoint()
            last.append(_now())
            await asyncio.sleep(20)  # under the idle limit each time
        await asyncio.sleep(3600)  # then silent

    outcome = await run_task(goes_quiet, timeout=Timeout(idle=30))
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert len(last) == 10
    assert 30 <= _now() - last[-1] < 31 + ControlWindows().cancel_window


@pytest.mark.parametrize(("work", "ok"), [(40.0, True), (60.0, False)])
async def test_paused_time_counts_toward_no_timeout(work: float, ok: bool) -> None:
    halfway = asyncio.Event()

    async def job(ctx: Any) -> str:
        for second in range(int(2 * work)):
            if second == int(work):
                halfway.set()
            await ctx.checkpoint()
            await asyncio.sleep(1)
        return "done"

    async with TaskRun(job, timeout=Timeout(per_attempt=100)) as run:
        await halfway.wait()
        assert await run.pause()
        await asyncio.sleep(1000)  # far past the limit, but paused
        assert run.status is S.PAUSED
        assert await run.resume()
        outcome = await run.wait()
    assert outcome.ok is ok
    if not ok:
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT


async def test_a_stop_waits_the_grace_window_then_cancels() -> None:
    started = asyncio.Event()

    async def deaf(ctx: Any) -> None:
        started.set()
        await asyncio.sleep(3600)  # never checkpoints

    windows = ControlWindows(stop_grace=30, cancel_window=5)
    async with TaskRun(deaf, windows=windows) as run:
        await started.wait()
        asked = _now()
        assert await run.stop(reason="operator")
        outcome = await run.wait()
    assert outcome.status is S.STOPPED
    assert 30 <= _now() - asked < 31
    assert trajectory(run)[-2:] == [
        ("running", "stopping", Trigger.USER_STOP),
        ("stopping", "stopped", Trigger.STOP_CONFIRMED),
    ]


async def test_a_pause_not_reached_rolls_back_after_the_window() -> None:
    started = asyncio.Event()

    async def busy(ctx: Any) -> None:
        started.set()
        await asyncio.sleep(3600)

    async with TaskRun(busy, windows=ControlWindows(pause_window=45)) as run:
        await started.wait()
        asked = _now()
        assert await run.pause() is False
        assert 45 <= _now() - asked < 46
        assert run.status is S.RUNNING
        assert trajectory(run)[-1] == ("pausing", "running", Trigger.PAUSE_NOT_REACHED)
        await run.stop()


async def test_the_start_timeout_counts_the_wait_in_the_queue() -> None:
    release = asyncio.Event()

    async def holds(ctx: Any) -> None:
        await release.wait()

    async def quick(ctx: Any) -> int:
        return 1

    async with Controller(max_parallel=1) as controller:
        controller.register("holds", holds)
        controller.register("quick", quick, timeout=Timeout(start=300))
        first = await controller.submit("holds")
        submitted = _now()
        late = await controller.submit("quick")
        outcome = await late.wait()
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.TIMEOUT_START
        assert 300 <= _now() - submitted < 301
        release.set()
        assert (await first.wait()).ok
