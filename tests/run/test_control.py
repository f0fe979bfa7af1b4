"""Stop, pause and resume: every answer is the truth about the task."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from chongming import (
    ControlWindows,
    FailureKind,
    InlineExecutor,
    TaskCancelled,
    TaskContext,
    TaskRun,
    TaskStatus,
)
from tests.support import assert_sound, trajectory, wait_for, wait_status

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)


async def looping(ctx) -> str:  # type: ignore[no-untyped-def]
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.001)


def looping_thread(ctx) -> str:  # type: ignore[no-untyped-def]
    while True:
        ctx.checkpoint()
        time.sleep(0.001)


@pytest.mark.parametrize("fn", [looping, looping_thread], ids=["coroutine", "thread"])
async def test_pause_resume_stop_round_trip(fn: object) -> None:
    async with TaskRun(fn, task_id="job-1", windows=FAST) as run:  # type: ignore[arg-type]
        await wait_status(run, S.RUNNING)
        assert await run.pause() is True
        assert run.status is S.PAUSED
        assert await run.pause() is True  # already paused: still the truth
        assert await run.resume() is True
        assert run.snapshot.status is S.RUNNING
        assert await run.stop(reason="release window") is True
        assert await run.stop() is False  # already stopping
        outcome = await run.wait(5)
    assert outcome.status is S.STOPPED
    assert trajectory(run)[3:] == [
        ("running", "pausing", "user:pause"),
        ("pausing", "paused", "runtime:pause_reached"),
        ("paused", "running", "user:resume"),
        ("running", "stopping", "user:stop"),
        ("stopping", "stopped", "runtime:stop_confirmed"),
    ]
    stop, confirmed = run.transitions[-2:]
    assert (stop.actor, stop.reason) == ("user", "release window")
    assert (confirmed.actor, confirmed.reason) == ("system", "release window")
    assert_sound(run)


async def test_pause_not_reached_rolls_back_and_returns_false(
    release_threads: list[threading.Event],
) -> None:
    busy = threading.Event()
    release_threads.append(busy)

    def never_checkpoints(ctx) -> str:  # type: ignore[no-untyped-def]
        busy.wait(5)
        return "done"

    windows = ControlWindows(stop_grace=1, pause_window=0.1)
    async with TaskRun(never_checkpoints, windows=windows) as run:
        await wait_status(run, S.RUNNING)
        assert await run.pause() is False
        assert run.status is S.RUNNING
        busy.set()
        outcome = await run.wait(5)
    assert outcome.ok
    assert trajectory(run)[3:5] == [
        ("running", "pausing", "user:pause"),
        ("pausing", "running", "runtime:pause_not_reached"),
    ]


class GatedInline(InlineExecutor):
    """Inline, but the call waits for a gate on the loop first.

    The run is ``running`` on the inline carrier while the gate is shut, so a
    pause request really meets a running inline task; the function itself
    runs on the loop thread once the gate opens.
    """

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def run(
        self,
        fn: Callable[..., Any],
        context: TaskContext,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        self.entered.set()
        await self.gate.wait()
        return await super().run(fn, context, args, kwargs)


async def test_pause_of_a_running_inline_task_rolls_back_and_returns_false() -> None:
    executor = GatedInline()
    seen: list[bool] = []

    def quick(ctx: TaskContext) -> int:
        seen.append(ctx.is_pause_requested)
        ctx.checkpoint()  # on the loop thread: must not block
        return 1

    windows = ControlWindows(stop_grace=1, pause_window=0.1)
    async with TaskRun(quick, executor=executor, windows=windows) as run:
        await executor.entered.wait()
        assert run.status is S.RUNNING
        assert await run.pause() is False
        assert run.status is S.RUNNING  # rolled back: never a pretend pause
        executor.gate.set()
        outcome = await run.wait(5)
    assert outcome.ok
    assert outcome.value == 1
    assert seen == [False]  # the withdrawn request does not linger
    assert trajectory(run)[3:] == [
        ("running", "pausing", "user:pause"),
        ("pausing", "running", "runtime:pause_not_reached"),
        ("running", "succeeded", "executor:completed"),
    ]
    assert_sound(run)


async def test_an_inline_checkpoint_under_a_pause_request_does_not_block() -> None:
    executor = GatedInline()
    seen: list[bool] = []

    def quick(ctx: TaskContext) -> int:
        seen.append(ctx.is_pause_requested)
        ctx.checkpoint()  # a blocking checkpoint here would freeze the loop itself
        return 1

    windows = ControlWindows(stop_grace=1, pause_window=5)
    async with TaskRun(quick, executor=executor, windows=windows) as run:
        await executor.entered.wait()
        pause = asyncio.ensure_future(run.pause())
        await wait_status(run, S.PAUSING)
        executor.gate.set()
        assert await pause is False  # it ended instead of pausing
        outcome = await run.wait(5)
    assert outcome.ok
    assert seen == [True]
    assert trajectory(run)[-1] == ("pausing", "succeeded", "executor:completed")
    assert_sound(run)


async def test_control_of_a_finished_task_returns_false() -> None:
    async with TaskRun(looping, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        await run.stop()
        await run.wait(5)
    version = run.status_version
    assert await run.stop() is False
    assert await run.pause() is False
    assert await run.resume() is False
    assert run.status_version == version


async def test_resume_of_a_running_task_returns_false() -> None:
    async with TaskRun(looping, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        assert await run.resume() is False
        await run.stop()


async def test_unstoppable_thread_ends_lost(release_threads: list[threading.Event]) -> None:
    hold = threading.Event()
    release_threads.append(hold)
    finished = threading.Event()

    def unstoppable(ctx) -> str:  # type: ignore[no-untyped-def]
        hold.wait(10)  # never checkpoints
        finished.set()
        return "too late"

    async with TaskRun(unstoppable, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        await run.stop(reason="deploy")
        outcome = await run.wait(5)
    assert outcome.status is S.LOST
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LOST
    assert "abandoned" in outcome.failure.message
    assert trajectory(run)[-1] == ("stopping", "lost", "runtime:stop_abandoned")
    hold.set()
    assert await asyncio.to_thread(finished.wait, 5)
    assert run.status is S.LOST  # a late end never rewrites the record
    assert_sound(run)


async def test_coroutine_that_ignores_the_request_is_cancelled_then_stopped() -> None:
    cleaned = asyncio.Event()

    async def no_checkpoints(ctx) -> None:  # type: ignore[no-untyped-def]
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.set()

    async with TaskRun(no_checkpoints, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        await run.stop()
        assert run.status is S.STOPPING
        outcome = await run.wait(5)
    assert outcome.status is S.STOPPED
    assert cleaned.is_set()  # it really ended before it was called stopped


async def test_coroutine_that_swallows_cancellation_and_returns_is_lost() -> None:
    async def swallower(ctx) -> str:  # type: ignore[no-untyped-def]
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass
        return "pretend"

    async with TaskRun(swallower, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        await run.stop()
        outcome = await run.wait(5)
    assert outcome.status is S.LOST
    assert outcome.failure is not None
    assert "swallowed" in outcome.failure.message


async def test_coroutine_that_swallows_cancellation_forever_is_lost() -> None:
    release = asyncio.Event()

    async def stubborn(ctx) -> None:  # type: ignore[no-untyped-def]
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                continue

    async with TaskRun(stubborn, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        await run.stop()
        outcome = await run.wait(5)
        assert outcome.status is S.LOST
        assert outcome.failure is not None
        assert "did not end" in outcome.failure.message
        release.set()


async def test_task_that_finishes_while_stopping_reports_what_happened(
    release_threads: list[threading.Event],
) -> None:
    started = threading.Event()
    proceed = threading.Event()
    release_threads.append(proceed)

    def finisher(ctx) -> str:  # type: ignore[no-untyped-def]
        started.set()
        proceed.wait(5)
        return "finished anyway"

    async with TaskRun(finisher, windows=ControlWindows(stop_grace=5)) as run:
        await asyncio.to_thread(started.wait, 5)
        await run.stop()
        proceed.set()
        outcome = await run.wait(5)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == "finished anyway"
    assert trajectory(run)[-1] == ("stopping", "succeeded", "executor:completed")


async def test_task_that_catches_task_cancelled_and_returns_succeeds() -> None:
    async def catcher(ctx) -> str:  # type: ignore[no-untyped-def]
        try:
            while True:
                await ctx.checkpoint()
                await asyncio.sleep(0.001)
        except TaskCancelled:
            return "cleaned up"

    async with TaskRun(catcher, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        await run.stop()
        outcome = await run.wait(5)
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, "cleaned up")


async def test_stop_while_paused(release_threads: list[threading.Event]) -> None:
    async with TaskRun(looping_thread, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        assert await run.pause()
        await run.stop(reason="abort")
        outcome = await run.wait(5)
    assert outcome.status is S.STOPPED
    assert trajectory(run)[-2:] == [
        ("paused", "stopping", "user:stop"),
        ("stopping", "stopped", "runtime:stop_confirmed"),
    ]


async def test_stop_while_pausing_settles_the_pause_call(
    release_threads: list[threading.Event],
) -> None:
    hold = threading.Event()
    release_threads.append(hold)

    def slow_to_checkpoint(ctx) -> None:  # type: ignore[no-untyped-def]
        hold.wait(5)
        ctx.checkpoint()

    windows = ControlWindows(stop_grace=5, pause_window=5)
    async with TaskRun(slow_to_checkpoint, windows=windows) as run:
        await wait_status(run, S.RUNNING)
        pause = asyncio.ensure_future(run.pause())
        await wait_status(run, S.PAUSING)
        await run.stop()
        assert await pause is False
        hold.set()
        outcome = await run.wait(5)
    assert outcome.status is S.STOPPED


async def test_exiting_the_context_stops_the_task() -> None:
    async with TaskRun(looping, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
    assert run.status is S.STOPPED
    stop = run.transitions[-2]
    assert (stop.trigger, stop.actor) == ("runtime:shutdown", "system")


async def test_cancelling_run_task_stops_the_task() -> None:
    from chongming import run_task

    started = asyncio.Event()
    ended = asyncio.Event()

    async def job(ctx) -> None:  # type: ignore[no-untyped-def]
        started.set()
        try:
            while True:
                await ctx.checkpoint()
                await asyncio.sleep(0.001)
        finally:
            ended.set()

    caller = asyncio.ensure_future(run_task(job, windows=FAST))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert ended.is_set()
    await wait_for(lambda: not [t for t in asyncio.all_tasks() if "chongming" in t.get_name()])


async def test_thread_task_waiting_for_a_worker_is_starting_and_stops_cleanly(
    release_threads: list[threading.Event],
) -> None:
    from chongming import ThreadExecutor

    hold = threading.Event()
    release_threads.append(hold)
    ran: list[int] = []

    def work(ctx, n: int) -> int:  # type: ignore[no-untyped-def]
        ran.append(n)
        while not hold.is_set():
            ctx.checkpoint()
            time.sleep(0.001)
        return n

    one_worker = ThreadExecutor(max_workers=1)
    async with (
        TaskRun(work, (1,), executor=one_worker, windows=FAST) as first,
        TaskRun(work, (2,), executor=one_worker, windows=FAST) as second,
    ):
        await wait_status(first, S.RUNNING)
        # Both calls are inside the executor; the only worker is busy with the first.
        await wait_for(lambda: one_worker.in_flight == 2)
        # No worker took it yet: it is still starting, not pretending to run.
        assert second.status is S.STARTING
        assert await second.stop(reason="not needed")
        outcome = await second.wait(5)
        assert outcome.status is S.STOPPED  # it never ran: stopped, not lost
        hold.set()
        assert (await first.wait(5)).ok
    assert ran == [1]
    assert trajectory(second)[-2:] == [
        ("starting", "stopping", "user:stop"),
        ("stopping", "stopped", "runtime:stop_confirmed"),
    ]


async def test_stop_before_the_coroutine_starts_never_runs_it() -> None:
    from chongming import Controller

    ran: list[str] = []

    async def job(ctx) -> None:  # type: ignore[no-untyped-def]
        ran.append(ctx.task_id)

    async with Controller(windows=FAST) as controller:
        controller.register("job", job)
        run = await controller.submit("job", task_id="early")
        assert run.status is S.STARTING  # dispatched, the driver has not run yet
        assert await run.stop(reason="changed my mind")
        outcome = await run.wait(5)
    assert outcome.status is S.STOPPED
    assert ran == []
    assert trajectory(run)[-2:] == [
        ("starting", "stopping", "user:stop"),
        ("stopping", "stopped", "runtime:stop_confirmed"),
    ]
    assert_sound(run)


async def test_two_pause_calls_share_one_answer_and_resume_cancels_a_pending_pause(
    release_threads: list[threading.Event],
) -> None:
    hold = threading.Event()
    release_threads.append(hold)

    def slow(ctx) -> None:  # type: ignore[no-untyped-def]
        hold.wait(5)
        while True:
            ctx.checkpoint()
            time.sleep(0.001)

    windows = ControlWindows(stop_grace=1, pause_window=5)
    async with TaskRun(slow, windows=windows) as run:
        await wait_status(run, S.RUNNING)
        first = asyncio.ensure_future(run.pause())
        await wait_status(run, S.PAUSING)
        second = asyncio.ensure_future(run.pause())
        await asyncio.sleep(0)
        assert await run.resume() is True  # withdraws the pause before it was reached
        assert await first is False
        assert await second is False
        assert run.status is S.RUNNING
        hold.set()
        assert await run.pause() is True  # a new pause now reaches a checkpoint
        await run.stop()
        assert (await run.wait(5)).status is S.STOPPED
    steps = trajectory(run)
    assert ("pausing", "running", "user:resume") in steps
    assert steps.count(("running", "pausing", "user:pause")) == 2
    assert_sound(run)


async def test_a_timeout_while_pausing_fails_the_attempt() -> None:
    from chongming import Timeout

    async def stuck(ctx) -> None:  # type: ignore[no-untyped-def]
        await asyncio.sleep(30)  # never reaches a checkpoint

    windows = ControlWindows(stop_grace=1, cancel_window=1, pause_window=5)
    async with TaskRun(stuck, windows=windows, timeout=Timeout(per_attempt=0.2)) as run:
        await wait_status(run, S.RUNNING)
        pause = asyncio.ensure_future(run.pause())
        outcome = await run.wait(5)
        assert await pause is False
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    assert trajectory(run)[-1] == ("pausing", "failed", "executor:failed")
