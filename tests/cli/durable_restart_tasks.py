"""Task module of the store-restart proof: ``--tasks tests.cli.durable_restart_tasks``.

``through_restarts`` runs ``STEPS`` memoised steps; each step's body appends
``<task> <step> <epoch> <pid>`` to a ledger file (one ``O_APPEND`` write,
see :mod:`tests.cli.durable_tasks`) and takes ``hold`` seconds, so a server
crash lands inside some step or between two. After step ``WAIT_AT`` an
operation through ``ctx.effect`` commits a row into a side table of the
store's own database, and then the task waits as its ``kind`` says:

- ``plain``: not at all;
- ``nap``: a durable sleep too short to park (it sleeps in its slot);
- ``park``: a durable sleep long enough to park (``PARK_AFTER`` and a bit):
  the task leaves its slot, ``queued`` with a ``not_before``, and comes back;
- ``fact``: ``wait_for_fact("go")``, sent by the test after a restart;
- ``unsent``: ``wait_for_fact("never")``, which nobody sends.

A last operation commits a second row before the task returns its kind.
"""

from __future__ import annotations

import os

from chongming import Controller, TaskContext
from chongming.plane.parking import PARK_AFTER
from tests.cli.durable_tasks import _commit_into, _mark, _row

STEPS = 8
WAIT_AT = 3
NAP = 0.3
PARK = PARK_AFTER + 0.5
KINDS = ("plain", "nap", "park", "fact", "unsent")
LATE_KINDS = ("plain", "nap", "park")  # enqueued after the first crash


async def through_restarts(
    ctx: TaskContext, ledger: str, table: str, kind: str, hold: float = 0.1
) -> str:
    assert ctx.journal is not None
    for n in range(STEPS):
        await ctx.checkpoint()
        line = f"{ctx.task_id} s{n} {ctx.journal.epoch} {os.getpid()}"
        await ctx.step(f"s{n}", _mark, ledger, line, hold)
        if n != WAIT_AT:
            continue
        await ctx.effect("row", _row, commit=_commit_into(table))
        if kind == "nap":
            await ctx.sleep("nap", NAP)
        elif kind == "park":
            await ctx.sleep("park", PARK)
        elif kind == "fact":
            await ctx.wait_for_fact("go")
        elif kind == "unsent":
            await ctx.wait_for_fact("never")
    await ctx.effect("done", _row, commit=_commit_into(table))
    return kind


def register(controller: Controller) -> None:
    controller.register("through_restarts", through_restarts, durable=True, max_resumes=20)
