"""Standalone runs (``run_task``, ``TaskRun``) share one thread executor of 40 workers.

As documented in docs/executors.md: every run that names no executor shares
one ``ThreadExecutor()``, so concurrent ``run_task`` calls of sync functions
are bounded together, as ``anyio.to_thread.run_sync`` calls are by anyio's
default limiter. Before, each standalone run made (and closed) an executor of
its own: any number of threads at once, and an executor built per call.
"""

from __future__ import annotations

import asyncio
import threading

from chongming import TaskRun, TaskStatus
from tests.support import wait_for

WORKERS = 40


async def test_concurrent_standalone_thread_runs_share_one_bound() -> None:
    release = threading.Event()
    running = 0
    most = 0
    lock = threading.Lock()

    def blocks(ctx: object) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(10)
        with lock:
            running -= 1

    runs = [TaskRun(blocks) for _ in range(WORKERS + 5)]
    entered = [await run.__aenter__() for run in runs]
    try:
        await wait_for(lambda: running == WORKERS)
        # The rest wait for a worker thread: started, not running.
        await asyncio.sleep(0.05)
        assert most == WORKERS
        waiting = [run for run in entered if run.status is TaskStatus.STARTING]
        assert len(waiting) == 5
    finally:
        release.set()
        for run in entered:
            await run.wait(10)
            await run.__aexit__(None, None, None)
    assert all(run.status is TaskStatus.SUCCEEDED for run in entered)
    assert most == WORKERS
