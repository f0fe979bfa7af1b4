"""Graceful close: stop admitting, wait, stop the rest; nothing left behind."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chongming import Controller, ControlWindows, TaskStatus
from tests.support import wait_for, wait_status

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)


async def loops(ctx) -> None:  # type: ignore[no-untyped-def]
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.001)


async def finishes_soon(ctx) -> str:  # type: ignore[no-untyped-def]
    await asyncio.sleep(0.05)
    return "done"


def chongming_tasks() -> list[asyncio.Task[object]]:
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not current and not t.done()]


async def test_close_stops_everything_and_reports_each_truthfully(
    release_threads: list[threading.Event],
) -> None:
    hold = threading.Event()
    release_threads.append(hold)

    def stuck(ctx) -> None:  # type: ignore[no-untyped-def]
        hold.wait(10)

    controller = Controller(max_parallel=3, windows=FAST)
    controller.register("loops", loops)
    controller.register("stuck", stuck)
    await controller.start()
    looping = await controller.submit("loops")
    thread = await controller.submit("stuck")
    third = await controller.submit("loops")
    queued = await controller.submit("loops")
    await wait_status(third, S.RUNNING)
    await wait_status(thread, S.RUNNING)  # a worker thread really took it
    await controller.close()
    assert looping.status is S.STOPPED
    assert thread.status is S.LOST  # cannot be killed: never claimed as stopped
    assert queued.status is S.STOPPED
    shutdown = queued.transitions[-1]
    assert (shutdown.trigger, shutdown.actor) == ("runtime:shutdown", "system")
    assert looping.transitions[-2].trigger == "runtime:shutdown"
    assert chongming_tasks() == []
    hold.set()


async def test_grace_lets_running_tasks_finish() -> None:
    controller = Controller(max_parallel=2, windows=FAST)
    controller.register("soon", finishes_soon)
    await controller.start()
    runs = [await controller.submit("soon") for _ in range(2)]
    await wait_for(lambda: all(r.status is S.RUNNING for r in runs))
    await controller.close(grace=5)
    assert [r.status for r in runs] == [S.SUCCEEDED, S.SUCCEEDED]


async def test_close_twice_concurrently() -> None:
    controller = Controller(windows=FAST)
    controller.register("loops", loops)
    await controller.start()
    run = await controller.submit("loops")
    await wait_status(run, S.RUNNING)
    await asyncio.gather(controller.close(), controller.close())
    assert run.status is S.STOPPED


async def test_cancelled_close_still_finishes_then_reraises() -> None:
    controller = Controller(windows=FAST)
    controller.register("loops", loops)
    await controller.start()
    run = await controller.submit("loops")
    await wait_status(run, S.RUNNING)
    closing = asyncio.ensure_future(controller.close())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert run.status is S.STOPPED
    assert chongming_tasks() == []


async def test_bad_grace() -> None:
    from chongming import ConfigurationError

    controller = Controller()
    with pytest.raises(ConfigurationError):
        await controller.close(grace=-1)
    await controller.close()


async def test_close_stops_paused_tasks_too() -> None:
    import time

    def thread_loop(ctx) -> None:  # type: ignore[no-untyped-def]
        while True:
            ctx.checkpoint()
            time.sleep(0.001)

    controller = Controller(max_parallel=2, windows=FAST)
    controller.register("coroutine", loops)
    controller.register("thread", thread_loop)
    await controller.start()
    runs = [await controller.submit("coroutine"), await controller.submit("thread")]
    for run in runs:
        await wait_status(run, S.RUNNING)
        assert await run.pause()
    await controller.close()
    for run in runs:
        assert run.status is S.STOPPED
        assert [t.to_status for t in run.transitions][-3:] == [S.PAUSED, S.STOPPING, S.STOPPED]
