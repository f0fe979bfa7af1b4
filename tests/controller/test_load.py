"""Load: many concurrent tasks, an exact transition count, bounded memory."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from chongming import Controller, TaskStatus
from chongming.state import audit_history
from tests.tiers import proof_scale

SCALE = proof_scale("CHONGMING_FAULT_SCALE", reduced=0.2)


async def steps(ctx, count: int) -> int:  # type: ignore[no-untyped-def]
    for index in range(count):
        await ctx.checkpoint()
        ctx.progress(index + 1, total=count)
        await asyncio.sleep(0)
    return count


@pytest.mark.slow
@pytest.mark.proof
async def test_ten_thousand_concurrent_tasks() -> None:
    n = max(1000, int(10_000 * SCALE))
    tracemalloc.start()
    async with Controller(max_parallel=n, keep_finished=n) as controller:
        controller.register("steps", steps)
        runs = [await controller.submit("steps", 5) for _ in range(n)]
        outcomes = await asyncio.wait_for(controller.wait_all(), 120)
        stats = await controller.stats()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(outcomes) == n
    assert all(outcome.status is TaskStatus.SUCCEEDED for outcome in outcomes)
    assert stats.by_status == {"succeeded": n}
    # pending->queued->starting->running->succeeded: exactly four per task
    assert sum(run.status_version for run in runs) == 4 * n
    for run in runs[:: max(1, n // 200)]:
        assert audit_history(run.snapshot, run.transitions) == []
    # Python allocations of this workload (the process's RSS also holds what
    # earlier tests left, so it would not measure this test).
    assert peak <= 300 * 2**20, f"peak {peak / 2**20:.0f} MiB"
