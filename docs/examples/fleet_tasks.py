"""The work a deployed fleet runs (deploy/): one durable task of three steps.

Every worker of the fleet imports this module (``chongming worker --tasks
fleet_tasks``); the service (``fleet_service.py``) only enqueues by name. A
worker killed mid-task leaves its recorded steps behind, and the worker that
takes the task over replays them instead of running them again.
"""

from __future__ import annotations

import asyncio
import os

from chongming import Controller, TaskContext


async def fetch(part: int) -> int:
    await asyncio.sleep(float(os.environ.get("FLEET_STEP_SECONDS", "0.05")))
    return part * part


async def sync_tenant(ctx: TaskContext, tenant: str) -> dict[str, object]:
    total = 0
    for part in range(3):
        total += await ctx.step(f"part-{part}", fetch, part)
    return {"tenant": tenant, "total": total}


def register(controller: Controller) -> None:
    controller.register("sync-tenant", sync_tenant, durable=True)
