"""Parks and resumes do not spend the retry budget; an attempt never shows above its maximum.

Issue 22, case 9. Before: every park of a long sleep or fact wait started a
new attempt counted against ``RetryPolicy.max_attempts``: a task with
``max_attempts=2`` that parked three times then failed ``attempt 4/2 …
retryable=True`` and was never retried; ``ps`` showed ``4/2``, a resumed
task ``2/1``. Retries, resumes and parks are counted apart now: ``attempt``
counts attempts; parks and resumes are read from the history.
"""

from __future__ import annotations

from typing import Any

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskStatus
from chongming.cli.display import describe_snapshot
from chongming.state.attempts import count_runs
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]

RETRY_ONCE = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))


FAILED_ONCE: list[int] = []


async def parks_then_fails_once(ctx: Any) -> str:
    for n in range(3):
        await ctx.sleep(f"nap-{n}", 0.3)  # each parks the task (the threshold is lowered)
    if not FAILED_ONCE:
        FAILED_ONCE.append(ctx.attempt)
        raise RuntimeError("the first time past the naps fails (retryable)")
    return f"done on attempt {ctx.attempt}"


async def test_parks_continue_the_attempt_and_leave_the_retry_budget_whole(
    where: object, stores: StoreMaker
) -> None:
    FAILED_ONCE.clear()
    async with Controller(store=stores.make(where), owner="client") as client:
        queued = await client.enqueue("parks_then_fails_once", task_id="p-1")
        worker = Controller(
            store=stores.make(where),
            owner="w-1",
            work=True,
            poll_interval=0.05,
            windows=FAST,
            park_threshold=0.1,  # each 0.3 s nap parks
        )
        worker.register(
            "parks_then_fails_once", parks_then_fails_once, durable=True, retry=RETRY_ONCE
        )
        async with worker:
            final = await queued.wait(timeout=30)
        history = await client.history("p-1")
    assert FAILED_ONCE == [1]  # it failed on its first attempt, three parks in
    assert final.status is TaskStatus.SUCCEEDED
    assert final.result == "done on attempt 2"  # retried: the budget was not spent by parks
    assert (final.attempt, final.max_attempts) == (2, 2)
    counts = count_runs(history)
    assert (counts.attempts, counts.parks, counts.resumes) == (2, 3, 0)
    assert max(t.attempt for t in history) <= final.max_attempts
    failed = [t for t in history if t.trigger == "runtime:retry_scheduled"]
    assert [t.attempt for t in failed] == [1]
    assert "attempt 2/2" in describe_snapshot(final)
