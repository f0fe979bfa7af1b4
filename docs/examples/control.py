"""Controlling a running task: pause, resume, stop, and an honest ``lost``.

Run it with ``python docs/examples/control.py``. It shows:

1. a pause round trip and a stop with an actor and a reason, printed as the
   task's history;
2. ``wait(timeout=...)`` raising ``TimeoutError`` without touching the task,
   and ``pause()`` returning ``False`` (with a rollback) when the task
   reaches no checkpoint in time;
3. a thread task that never checkpoints: it cannot be stopped, so it ends
   ``lost`` rather than pretending to be ``stopped``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from chongming import ControlWindows, TaskContext, TaskRun, TaskStatus, Transition

#: Short windows so the example finishes quickly (the defaults are 5 s / 1 s / 2 s). A pause
#: returns as soon as the task reaches a checkpoint, so a generous pause window costs nothing.
WINDOWS = ControlWindows(stop_grace=0.5, cancel_window=0.5, pause_window=2.0)
#: A pause window shorter than the blocking call in ``bulk_copy``: that pause cannot be reached.
IMPATIENT = ControlWindows(stop_grace=0.5, cancel_window=0.5, pause_window=0.3)


def sync_rows(ctx: TaskContext, tenant: str) -> int:
    """A well-behaved sync task: it checkpoints on every row."""
    synced = 0
    for _ in range(200):
        ctx.checkpoint()  # stop and pause take effect here
        time.sleep(0.02)
        synced += 1
    return synced


def bulk_copy(ctx: TaskContext, seconds: float) -> str:
    """A badly behaved sync task: one long blocking call, no checkpoint."""
    time.sleep(seconds)
    return "copied"


async def started(run: TaskRun) -> None:
    """Until the task's function runs (a pause asked before that would be refused)."""
    while run.status is not TaskStatus.RUNNING:
        await asyncio.sleep(0.01)


def print_history(transitions: Sequence[Transition]) -> None:
    """The history as a table, like ``chongming history ID`` (the AT column left out)."""
    header = ("VER", "FROM", "TO", "ATTEMPT", "TRIGGER", "ACTOR", "REASON")
    rows = [
        (
            str(t.version),
            t.from_status.value,
            t.to_status.value,
            str(t.attempt),
            t.trigger,
            t.actor,
            t.reason or "-",
        )
        for t in transitions
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * width for width in widths), *rows]:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


async def pause_and_stop() -> None:
    print("== Pause round trip, then a stop with an actor and a reason ==")
    async with TaskRun(sync_rows, ("tenant-A",), task_id="job-1", windows=WINDOWS) as run:
        await started(run)
        paused = await run.pause()  # returns once the task sits at a checkpoint
        print(f"pause()  -> {paused}, status {run.status.value}")
        await asyncio.sleep(0.2)
        resumed = await run.resume()
        print(f"resume() -> {resumed}, status {run.status.value}")
        await asyncio.sleep(0.1)
        asked = await run.stop(reason="release window", actor="alice")
        print(f"stop()   -> {asked}, status {run.status.value}")
        outcome = await run.wait(timeout=10)
    print(f"final status: {outcome.status.value}")
    print()
    print_history(run.transitions)
    print()


async def waiting_is_not_failing() -> None:
    print("== wait(timeout) and a pause that is not reached ==")
    async with TaskRun(bulk_copy, (2.0,), task_id="job-2", windows=IMPATIENT) as run:
        await started(run)
        try:
            await run.wait(timeout=0.1)
        except TimeoutError:
            print(f"wait(timeout=0.1) -> TimeoutError; the task is still {run.status.value}")
        paused = await run.pause()  # no checkpoint within the 0.3 s pause window
        print(f"pause() -> {paused}; status rolled back to {run.status.value}")
        last = run.transitions[-1]
        print(
            f"last transition: {last.from_status.value} -> {last.to_status.value} by {last.trigger}"
        )
        outcome = await run.wait(timeout=10)
    print(f"final status: {outcome.status.value} (value {outcome.value!r})")
    print()


async def unstoppable() -> None:
    print("== A task that cannot be stopped: reported truthfully ==")
    async with TaskRun(bulk_copy, (2.0,), task_id="job-3", windows=WINDOWS) as run:
        await started(run)
        await run.stop(reason="maintenance")
        outcome = await run.wait(timeout=10)
    assert outcome.failure is not None
    print(f"final status : {outcome.status.value}")
    print(f"failure kind : {outcome.failure.kind.value}")
    print(
        "meaning      : a thread cannot be killed; the task may still be producing "
        "side effects in the background, so the runtime will not say 'stopped'"
    )
    print(f"message      : {outcome.failure.message}")
    last = run.transitions[-1]
    print(f"last transition: {last.from_status.value} -> {last.to_status.value} by {last.trigger}")


async def main() -> None:
    await pause_and_stop()
    await waiting_is_not_failing()
    await unstoppable()
    # The abandoned thread still finishes its sleep; the interpreter waits for it at exit.


if __name__ == "__main__":
    asyncio.run(main())
