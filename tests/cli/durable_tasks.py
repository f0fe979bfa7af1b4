"""Task module of the durable kill -9 proof: ``--tasks tests.cli.durable_tasks``.

``ten_steps`` runs ten memoised steps; each appends ``<task> <step> <epoch>
<pid>`` to a ledger file (one ``O_APPEND`` write) and then takes a moment,
so a worker killed at a random instant is killed inside some step or
between two. The ledger counts real executions; the store says which
attempt's epoch recorded each step.
"""

from __future__ import annotations

import os
import time

from chongming import Controller, TaskContext

STEPS = 10


def _mark(ledger: str, line: str, hold: float) -> str:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    time.sleep(hold)
    return line


async def ten_steps(ctx: TaskContext, ledger: str, hold: float = 0.05) -> list[str]:
    assert ctx.journal is not None
    done = []
    for n in range(STEPS):
        await ctx.checkpoint()
        line = f"{ctx.task_id} s{n} {ctx.journal.epoch} {os.getpid()}"
        done.append(await ctx.step(f"s{n}", _mark, ledger, line, hold))
    return done


def register(controller: Controller) -> None:
    controller.register("ten_steps", ten_steps, durable=True, max_resumes=1000)
