"""Task module of the child-task kill -9 proof: ``--tasks tests.cli.children_tasks``.

``fan_parent`` spawns ``count`` ``ledger_child`` children and gathers them.
Each child runs one memoised step that appends ``<child id> <epoch> <pid>`` to
a ledger (one ``O_APPEND`` write) and takes a moment, so a kill lands while
children run; the parent is parked (or replaying) meanwhile.
"""

from __future__ import annotations

import os
import time
from typing import Any

from chongming import Controller, TaskContext


def _mark(ledger: str, line: str, hold: float) -> int:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    time.sleep(hold)
    return 1


async def ledger_child(ctx: TaskContext, ledger: str, n: int, hold: float) -> int:
    assert ctx.journal is not None
    line = f"{ctx.task_id} {ctx.journal.epoch} {os.getpid()}"
    await ctx.step("mark", _mark, ledger, line, hold)
    return n


async def fan_parent(ctx: TaskContext, ledger: str, count: int, hold: float) -> Any:
    handles = [await ctx.spawn("ledger_child", ledger, n, hold) for n in range(count)]
    return sum(await ctx.gather(*handles))


def register(controller: Controller) -> None:
    controller.register("ledger_child", ledger_child, durable=True, max_resumes=50)
    controller.register("fan_parent", fan_parent, durable=True, max_resumes=50)
