"""The controller on the host's loop: plain asyncio and uvloop, host cancellation, close.

Each scenario runs in its own ``asyncio.Runner`` so the test can see what is
left when the loop ends: asyncio tasks, threads, and anything reported to the
loop's exception handler ("Task was destroyed but it is pending", "exception
was never retrieved").
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import pytest
import uvloop

from chongming import (
    Controller,
    ControllerClosed,
    ControlWindows,
    FailureKind,
    TaskContext,
    TaskRun,
    TaskStatus,
)
from tests.support import assert_sound, wait_for

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)
BOUND = 10.0

LoopFactory = Callable[[], asyncio.AbstractEventLoop]
LOOPS = [
    pytest.param(asyncio.new_event_loop, id="asyncio"),
    pytest.param(uvloop.new_event_loop, id="uvloop"),
]


def host(loop_factory: LoopFactory, scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``scenario`` as the host's main coroutine; assert it left nothing behind."""
    reported: list[dict[str, Any]] = []
    before = set(threading.enumerate())
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.get_loop().set_exception_handler(lambda _, context: reported.append(context))
        runner.run(scenario())
    gc.collect()  # a pending task destroyed now reports to the handler above
    assert reported == [], [context.get("message") for context in reported]
    deadline = time.monotonic() + BOUND
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [thread for thread in threading.enumerate() if thread not in before]
    assert left == [], f"threads left behind: {left}"


async def spin(ctx: TaskContext) -> None:
    """A coroutine task that runs until stopped."""
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.001)


def grind(ctx: TaskContext) -> None:
    """A thread task that runs until stopped."""
    while True:
        ctx.checkpoint()
        time.sleep(0.001)


def assert_nothing_left_on_the_loop() -> None:
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def start_workload(controller: Controller) -> list[TaskRun]:
    """A coroutine and a thread task running, and one more queued behind them."""
    controller.register("spin", spin)
    controller.register("grind", grind)
    runs = [
        await controller.submit("spin", task_id="coroutine"),
        await controller.submit("grind", task_id="thread"),
        await controller.submit("spin", task_id="queued"),
    ]
    await wait_for(lambda: runs[0].status is S.RUNNING and runs[1].status is S.RUNNING)
    assert runs[2].status is S.QUEUED
    return runs


def assert_all_stopped(runs: list[TaskRun]) -> None:
    assert [run.status for run in runs] == [S.STOPPED, S.STOPPED, S.STOPPED]
    for run in runs[:2]:
        assert run.transitions[-2].to_status is S.STOPPING
        assert run.transitions[-1].trigger == "runtime:stop_confirmed"
    queued = runs[2]  # it never ran: stopped straight from the queue
    assert queued.snapshot.started_at is None
    assert [(t.from_status, t.to_status) for t in queued.transitions][-1] == (S.QUEUED, S.STOPPED)
    for run in runs:
        assert_sound(run)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_the_controller_runs_on_whatever_loop_the_host_runs(loop_factory: LoopFactory) -> None:
    async def scenario() -> None:
        host_loop = asyncio.get_running_loop()
        seen: list[asyncio.AbstractEventLoop] = []

        async def where(ctx: TaskContext, n: int) -> int:
            seen.append(asyncio.get_running_loop())
            await ctx.checkpoint()
            return n

        def square(ctx: TaskContext, n: int) -> int:
            ctx.checkpoint()
            return n * n

        async with Controller(max_parallel=2, windows=FAST) as controller:
            controller.register("where", where)
            controller.register("square", square)
            controller.register("grind", grind)
            runs = [await controller.submit("square", n) for n in range(4)]
            runs.append(await controller.submit("where", 7))
            assert [run.status for run in runs].count(S.QUEUED) >= 2  # over the limit: queued
            outcomes = await controller.wait_all(timeout=BOUND)
            assert [outcome.value for outcome in outcomes] == [0, 1, 4, 9, 7]

            long = await controller.submit("grind")
            await wait_for(lambda: long.status is S.RUNNING)
            assert await long.pause() is True
            assert await long.resume() is True
            assert await controller.stop(long.task_id) is True
            assert (await long.wait(BOUND)).status is S.STOPPED
        assert seen == [host_loop]
        if loop_factory is uvloop.new_event_loop:
            assert isinstance(host_loop, uvloop.Loop)
        assert_nothing_left_on_the_loop()

    host(loop_factory, scenario)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_cancelled_anyio_task_group_shuts_the_controller_down(loop_factory: LoopFactory) -> None:
    async def scenario() -> None:
        runs: list[TaskRun] = []
        ready = anyio.Event()
        after_close: list[str] = []

        async def service() -> None:
            async with Controller(max_parallel=2, windows=FAST) as controller:
                runs.extend(await start_workload(controller))
                # a worker thread really took it: only then can it be lost
                await wait_for(lambda: runs[0].status is S.RUNNING)
                ready.set()
                await anyio.sleep_forever()
            after_close.append("reached")  # never: close re-raises the cancellation

        with anyio.CancelScope() as host_scope:
            async with anyio.create_task_group() as group:
                group.start_soon(service)
                await ready.wait()
                host_scope.cancel()
        assert host_scope.cancelled_caught  # the cancellation reached the host's scope
        assert after_close == []
        assert_all_stopped(runs)
        assert_nothing_left_on_the_loop()

    host(loop_factory, scenario)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_cancelled_asyncio_task_group_shuts_the_controller_down(
    loop_factory: LoopFactory,
) -> None:
    release, finished = threading.Event(), threading.Event()

    async def scenario() -> None:
        runs: list[TaskRun] = []
        ready = asyncio.Event()

        def stubborn(ctx: TaskContext) -> None:
            """Never checkpoints: it cannot be stopped, only abandoned."""
            release.wait(BOUND)
            finished.set()

        async def service() -> None:
            async with Controller(max_parallel=3, windows=FAST) as controller:
                controller.register("stubborn", stubborn)
                runs.append(await controller.submit("stubborn", task_id="stubborn"))
                runs.extend(await start_workload(controller))
                # a worker thread really took it: only then can it be lost
                await wait_for(lambda: runs[0].status is S.RUNNING)
                ready.set()
                await asyncio.Event().wait()

        async def host_main() -> None:
            async with asyncio.TaskGroup() as group:
                group.create_task(service())
                await asyncio.Event().wait()

        main = asyncio.create_task(host_main())
        await asyncio.wait_for(ready.wait(), BOUND)
        main.cancel()
        with pytest.raises(asyncio.CancelledError):
            await main
        assert main.cancelled()  # the cancellation propagated through the task group

        lost, *stopped = runs
        assert_all_stopped(stopped)
        assert lost.status is S.LOST  # reported truthfully: a thread cannot be killed
        assert lost.snapshot.failure is not None
        assert lost.snapshot.failure.kind is FailureKind.LOST
        assert not finished.is_set()  # abandoned, not stopped: it is still running
        assert_nothing_left_on_the_loop()
        release.set()  # now its thread can end; host() checks that it does

    try:
        host(loop_factory, scenario)
    finally:
        release.set()
    assert finished.is_set()


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_failing_sibling_shuts_the_controller_down(loop_factory: LoopFactory) -> None:
    async def scenario() -> None:
        runs: list[TaskRun] = []
        ready = asyncio.Event()

        async def service() -> None:
            async with Controller(max_parallel=2, windows=FAST) as controller:
                runs.extend(await start_workload(controller))
                # a worker thread really took it: only then can it be lost
                await wait_for(lambda: runs[0].status is S.RUNNING)
                ready.set()
                await asyncio.Event().wait()

        async def crashing_sibling() -> None:
            await ready.wait()
            raise KeyError("sibling failed")

        async def host_main() -> None:
            async with asyncio.TaskGroup() as group:
                group.create_task(service())
                group.create_task(crashing_sibling())

        with pytest.raises(ExceptionGroup) as caught:
            await host_main()
        assert caught.group_contains(KeyError)
        assert_all_stopped(runs)
        assert_nothing_left_on_the_loop()

    host(loop_factory, scenario)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_close_twice_concurrently_and_use_after_close(loop_factory: LoopFactory) -> None:
    async def scenario() -> None:
        controller = Controller(max_parallel=2, windows=FAST)
        await controller.start()
        runs = await start_workload(controller)

        first = asyncio.create_task(controller.close(grace=0.05))
        second = asyncio.create_task(controller.close())
        await asyncio.sleep(0)  # both closers are now inside close()
        first.cancel()  # an impatient caller: the shutdown still runs to its end
        await asyncio.wait_for(second, BOUND)
        assert all(run.done for run in runs)  # the second closer waited for the end
        with pytest.raises(asyncio.CancelledError):
            await first
        assert_all_stopped(runs)

        await controller.close()  # idempotent
        await controller.close(grace=1)
        with pytest.raises(ControllerClosed):
            await controller.submit("spin")
        with pytest.raises(ControllerClosed):
            await controller.start()
        with pytest.raises(ControllerClosed):
            async with controller:
                pass
        assert_nothing_left_on_the_loop()

    host(loop_factory, scenario)
