"""Task module of the stored-pipeline kill -9 proof: ``--tasks tests.cli.pipeline_tasks``.

``node`` appends ``<task id> <pid>`` to a ledger (one ``O_APPEND`` write),
holds a moment and returns the sum of its upstream results plus one, so the
sink's result says whether every result reached it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from chongming import Controller, TaskContext


async def node(ctx: TaskContext, ledger: str, hold: float) -> int:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{ctx.task_id} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    await asyncio.sleep(hold)
    upstream: Any = ctx.upstream
    return 1 + sum(int(value) for value in upstream.values())


def register(controller: Controller) -> None:
    controller.register("node", node)
