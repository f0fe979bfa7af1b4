"""The process executor: a stop that really stops, a crash contained, a refusal at submit.

Run it with ``python docs/examples/process_executor.py``. It shows:

1. a task that never checkpoints and ignores ``SIGTERM``: when the stop
   grace window runs out, its worker's process group is terminated, then
   killed; the task is ``stopped`` and its history says how;
2. a worker that segfaults: the task fails with the kind ``crashed`` and the
   signal, the controller carries on, and the next task runs on a new worker;
3. a lambda, refused when it is submitted, with the reason and the fix.

The task functions are defined in this script, and everything that runs the
program sits under ``if __name__ == "__main__":``: each worker imports the
script again to find the functions, and must not run the program a second
time.
"""

from __future__ import annotations

import asyncio
import ctypes
import signal
import time

from chongming import ConfigurationError, Controller, ControlWindows, TaskContext
from chongming.executors import ProcessExecutor

#: The stop grace window: how long a task may take to honour a stop request.
WINDOWS = ControlWindows(stop_grace=0.5)


def render(ctx: TaskContext, frames: int) -> int:
    """A well-behaved task: it checkpoints on every frame."""
    for _ in range(frames):
        ctx.checkpoint()  # stop and pause take effect here, even in a child process
        time.sleep(0.01)
    return frames


def stubborn(ctx: TaskContext) -> None:
    """A badly behaved task: it ignores SIGTERM and never reaches a checkpoint."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(0.1)


def native_crash(ctx: TaskContext) -> None:
    """A bug in native code: it reads address 0 and takes its process down."""
    ctypes.string_at(0)


async def main() -> None:
    # grace: seconds between SIGTERM and SIGKILL once the stop grace window is over.
    async with (
        ProcessExecutor(max_workers=2, grace=0.5) as processes,
        Controller(executor=processes, windows=WINDOWS) as controller,
    ):
        controller.register("render", render)
        controller.register("stubborn", stubborn)
        controller.register("native_crash", native_crash)
        controller.register("answer", lambda ctx: 42)  # fine in a thread, not in a process

        print("== An unresponsive task, really stopped ==")
        run = await controller.submit("stubborn", task_id="job-1")
        while run.status.value != "running":
            await asyncio.sleep(0.01)
        await controller.stop("job-1", reason="release window")
        outcome = await run.wait(timeout=30)
        print(f"final status: {outcome.status.value}")
        for t in run.transitions:
            reason = f"  ({t.reason})" if t.reason else ""
            print(f"  {t.from_status.value:>8} -> {t.to_status.value:<9} by {t.trigger}{reason}")
        print()

        print("== A crash, contained ==")
        crashed = await controller.submit("native_crash", task_id="job-2")
        outcome = await crashed.wait(timeout=30)
        assert outcome.failure is not None
        print(f"final status : {outcome.status.value}")
        print(f"failure kind : {outcome.failure.kind.value}")
        print(f"message      : {outcome.failure.message}")
        after = await controller.submit("render", 5, task_id="job-3")
        outcome = await after.wait(timeout=30)
        print(f"next task    : {outcome.status.value} (value {outcome.value})")
        print()

        print("== A lambda, refused at submit ==")
        try:
            await controller.submit("answer")
        except ConfigurationError as error:
            print(f"refused: {error}")


if __name__ == "__main__":
    asyncio.run(main())
