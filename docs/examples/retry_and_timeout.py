"""Retries with exponential backoff, and a per-attempt timeout.

Run it with ``python docs/examples/retry_and_timeout.py``. Three runs:

1. a flaky task that fails twice and succeeds on its 3rd attempt of 5;
2. a task that always fails: the retry budget (2 attempts) runs out;
3. a task slower than its 0.5 s per-attempt timeout: ``failed`` with the
   failure kind ``timeout_attempt``, which is retryable.
"""

from __future__ import annotations

import asyncio

from chongming import (
    ExponentialBackoff,
    RetryPolicy,
    TaskContext,
    Timeout,
    run_task,
    task,
)


def flaky(ctx: TaskContext) -> str:
    """Fails on its first two attempts (``ctx.attempt`` counts from 1)."""
    ctx.checkpoint()
    if ctx.attempt < 3:
        raise ConnectionError(f"upstream unavailable (attempt {ctx.attempt})")
    return f"succeeded on attempt {ctx.attempt}"


BUDGET = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.05))


@task(retry=BUDGET)
def always_broken(ctx: TaskContext) -> None:
    """The retry policy travels with the function through @task."""
    ctx.checkpoint()
    raise ValueError("malformed input row 17")


async def slow_report(ctx: TaskContext) -> str:
    """An async def task: it runs on the loop and awaits its checkpoints."""
    for _ in range(100):
        await ctx.checkpoint()
        await asyncio.sleep(0.05)  # 5 s of work in total
    return "report ready"


async def main() -> None:
    retry = RetryPolicy(max_attempts=5, backoff=ExponentialBackoff(base=0.05, factor=2))
    outcome = await run_task(flaky, retry=retry)
    print("== Retry: succeeds after two failures ==")
    print(f"  final status : {outcome.status.value}")
    print(f"  value        : {outcome.value}")
    print(f"  attempts     : {outcome.attempts}/{retry.max_attempts}")
    print()

    outcome = await run_task(always_broken)
    assert outcome.failure is not None
    print("== Retry: budget exhausted ==")
    print(f"  final status : {outcome.status.value}")
    print(f"  attempts     : {outcome.attempts}/{BUDGET.max_attempts}")
    print(f"  failure kind : {outcome.failure.kind.value}")
    print(f"  message      : {outcome.failure.exception_type}: {outcome.failure.message}")
    print()

    outcome = await run_task(slow_report, timeout=Timeout(per_attempt=0.5))
    assert outcome.failure is not None
    print("== Timeout: at most 0.5 s per attempt ==")
    print(f"  final status : {outcome.status.value}")
    print(f"  failure kind : {outcome.failure.kind.value}")
    print(f"  retryable    : {outcome.failure.retryable}")
    print(f"  elapsed      : {outcome.elapsed:.2f}s")


if __name__ == "__main__":
    asyncio.run(main())
