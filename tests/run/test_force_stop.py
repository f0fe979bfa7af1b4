"""``force_stop``: the grace window ends now, and the record says what really happened."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from chongming import ControlWindows, FailureKind, TaskRun, TaskStatus
from tests.support import wait_status

S = TaskStatus
#: A grace window far longer than any test: only a forced stop can end these tasks in time.
PATIENT = ControlWindows(stop_grace=120.0, cancel_window=0.5, pause_window=0.5)


async def deaf_coroutine(ctx: Any) -> None:
    await asyncio.sleep(3600)  # never checkpoints


_RELEASE = threading.Event()


def deaf_thread(ctx: Any) -> None:
    _RELEASE.wait(60)  # never checkpoints; released at teardown


async def test_forced_stop_after_a_stop_cancels_a_coroutine_at_once() -> None:
    async with TaskRun(deaf_coroutine, task_id="deaf", windows=PATIENT) as run:
        await wait_status(run, S.RUNNING)
        assert await run.stop(reason="first Ctrl-C") is True
        assert run.status is S.STOPPING
        assert await run.force_stop(reason="second Ctrl-C") is True
        outcome = await run.wait(10)  # far inside the 120 s grace window
    assert outcome.status is S.STOPPED
    assert [t.to_status for t in run.transitions][-2:] == [S.STOPPING, S.STOPPED]


async def test_forced_stop_of_a_thread_is_recorded_lost_not_stopped() -> None:
    _RELEASE.clear()
    try:
        async with TaskRun(deaf_thread, task_id="deaf-t", windows=PATIENT) as run:
            await wait_status(run, S.RUNNING)
            assert await run.force_stop() is True  # without a stop before it
            outcome = await run.wait(10)
    finally:
        _RELEASE.set()
    assert outcome.status is S.LOST
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LOST


async def test_forced_stop_of_an_ended_task_does_nothing() -> None:
    async def quick(ctx: Any) -> int:
        return 1

    async with TaskRun(quick, task_id="quick") as run:
        outcome = await run.wait(10)
        assert await run.force_stop() is False
    assert outcome.status is S.SUCCEEDED
    assert run.status is S.SUCCEEDED
