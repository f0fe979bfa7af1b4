"""A task module for the ``chongming`` command line (``make demo`` runs it).

The CLI imports only the module named by ``--tasks`` and runs only the names
its ``register(controller)`` registers, with JSON arguments::

    export PYTHONPATH=docs/examples
    chongming --db demo.db tasks --tasks demo_tasks
    chongming --db demo.db run --tasks demo_tasks nightly-sync --arg tenant=A

``nightly-sync`` is a small multi-step job: it reports progress after every
step and checkpoints inside each one, so it can be watched, paused, resumed
and stopped from another terminal while it runs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from chongming import Controller, RetryPolicy, TaskContext, Timeout

STEPS = ("extract orders", "extract refunds", "transform", "deduplicate", "load", "verify")


def nightly_sync(ctx: TaskContext, tenant: str, step_seconds: float = 0.4) -> dict[str, Any]:
    """Six steps; each is cut into short slices with a checkpoint between them."""
    rows = 0
    for index, step in enumerate(STEPS):
        ctx.progress(index, total=len(STEPS), unit="steps", message=f"{tenant}: {step}")
        deadline = time.monotonic() + step_seconds
        while time.monotonic() < deadline:
            ctx.checkpoint()  # honours stop and pause, refreshes the heartbeat
            time.sleep(0.02)
        rows += 1_000 * (index + 1)
        ctx.log("%s done (%d rows so far)", step, rows)
    ctx.progress(len(STEPS), total=len(STEPS), unit="steps", message=f"{tenant}: done")
    return {"tenant": tenant, "rows": rows}


async def endless(ctx: TaskContext, interval: float = 0.05) -> None:
    """Runs until someone stops it: for trying pause, resume and stop."""
    beats = 0
    while True:
        await ctx.checkpoint()
        beats += 1
        ctx.progress(beats, unit="beats")
        await asyncio.sleep(interval)


async def broken(ctx: TaskContext, reason: str = "the upstream API returned 503") -> None:
    """Always fails, after the retries its registration allows."""
    await ctx.checkpoint()
    raise RuntimeError(reason)


def register(controller: Controller) -> None:
    controller.register(
        "nightly-sync", nightly_sync, tags={"etl"}, timeout=Timeout(per_attempt=600)
    )
    controller.register("endless", endless, tags={"demo"})
    controller.register("broken", broken, retry=RetryPolicy(max_attempts=2))
