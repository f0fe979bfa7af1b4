"""The pause arithmetic that ``docs/retries-and-timeouts.md`` states is true.

The numbers are read from the page itself, so the text cannot drift from what
the runtime does: paused time is excluded from ``per_attempt``, work before
and after the pause is not. The work and the pause are real time by nature
(the attempt clock is what is under test); the whole check takes under a second.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from chongming import (
    ControlWindows,
    FailureKind,
    Outcome,
    TaskContext,
    TaskRun,
    TaskStatus,
    Timeout,
)
from tests.support import wait_status

S = TaskStatus
PAGE = Path(__file__).parents[2] / "docs" / "retries-and-timeouts.md"
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
SUCCEEDS = re.compile(
    rf"A task with `per_attempt={NUMBER}` that works for {NUMBER} s, sits paused for "
    rf"{NUMBER} s, and then works for another {NUMBER} s succeeds: {NUMBER} s of attempt "
    rf"time, although {NUMBER} s passed on the wall clock\."
)
FAILS = re.compile(
    rf"Work {NUMBER} s before and {NUMBER} s after the pause and the attempt fails with "
    rf"`timeout_attempt` {NUMBER} s after the resume, because {NUMBER} s of work is more "
    rf"than {NUMBER} s"
)
#: Scheduling slack allowed on top of the documented seconds.
SLACK = 0.1


def claims(pattern: re.Pattern[str]) -> list[float]:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    found = pattern.search(text)
    assert found is not None, f"{PAGE.name} no longer says: {pattern.pattern}"
    return [float(number) for number in found.groups()]


async def work_pause_work(
    limit: float, before: float, paused: float, after: float
) -> tuple[Outcome, float]:
    """Run ``before`` s of work, a pause of ``paused`` s, ``after`` s of work.

    Returns the outcome and the seconds from the resume to the end.
    """

    async def task(ctx: TaskContext) -> str:
        await asyncio.sleep(before)
        await ctx.checkpoint()  # the pause requested meanwhile is reached here
        await asyncio.sleep(after)
        return "done"

    windows = ControlWindows(pause_window=before + 5, stop_grace=1, cancel_window=1)
    async with TaskRun(task, timeout=Timeout(per_attempt=limit), windows=windows) as run:
        await wait_status(run, S.RUNNING)
        assert await run.pause() is True
        await asyncio.sleep(paused)
        assert run.status is S.PAUSED
        assert await run.resume() is True
        resumed = time.monotonic()
        outcome = await run.wait(limit + 5)
        return outcome, time.monotonic() - resumed


async def test_the_documented_pause_arithmetic_holds() -> None:
    limit, before, paused, after, attempt_time, wall = claims(SUCCEEDS)
    late_before, late_after, fails_after, work, late_limit = claims(FAILS)
    # The page's own sums.
    assert round(before + after, 6) == attempt_time < limit
    assert round(before + paused + after, 6) == wall > limit  # no exclusion: it would fail
    assert late_limit == limit
    assert round(late_before + late_after, 6) == work > limit
    assert round(limit - late_before, 6) == fails_after

    (good, _), (late, after_resume) = await asyncio.gather(
        work_pause_work(limit, before, paused, after),
        work_pause_work(limit, late_before, paused, late_after),
    )

    assert good.status is S.SUCCEEDED, good.failure
    assert good.elapsed >= wall - SLACK  # the wall clock did pass the limit
    assert late.status is S.FAILED
    assert late.failure is not None
    assert late.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    # The budget left at the pause was spent after the resume, not during the pause.
    assert fails_after - SLACK <= after_resume <= fails_after + 5 * SLACK
