"""The attempt is the context its function receives, and its control block: one object."""

from __future__ import annotations

import asyncio

from chongming import TaskRun
from chongming.run.attempt import Attempt
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import AttemptSignals


async def test_the_function_receives_the_attempt_and_every_field_is_set() -> None:
    seen: list[object] = []
    release = asyncio.Event()

    async def task(ctx: TaskContext) -> int:
        seen.append(ctx)
        await release.wait()
        return ctx.attempt

    async with TaskRun(task) as run:
        while not seen:
            await asyncio.sleep(0)
        attempt = run._current
        assert attempt is not None
        # The very object the function got, so a stop the run asks of its attempt
        # is the flag the function's checkpoints read.
        assert seen == [attempt]
        # Attempt.__init__ sets the fields of all three layers inline (no base
        # constructor runs): a field added to one of them must be set there too.
        fields = (*AttemptSignals.__slots__, *TaskContext.__slots__, *Attempt.__slots__)
        unset = [name for name in fields if not hasattr(attempt, name)]
        assert unset == []
        assert (attempt.task_id, attempt.attempt, attempt.is_stop_requested) == (
            run.task_id,
            1,
            False,
        )
        release.set()
        outcome = await run.wait(5)
    assert outcome.value == 1
