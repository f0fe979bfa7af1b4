"""Task module of the cluster-limit process test: ``--tasks tests.cli.limit_tasks``.

``call_api`` marks itself running with a file named ``<pid>-<task id>`` for
as long as its body runs, so a test can count what really runs at once
across processes (a killed worker leaves its marks behind, named by its pid).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from chongming import Controller, TaskContext


def call_api(ctx: TaskContext, marks: str, hold: float) -> str:
    mark = Path(marks) / f"{os.getpid()}-{ctx.task_id}"
    mark.touch()
    try:
        deadline = time.monotonic() + hold
        while time.monotonic() < deadline:
            ctx.checkpoint()
            time.sleep(0.01)
    finally:
        mark.unlink()
    return ctx.task_id


def register(controller: Controller) -> None:
    controller.register("call_api", call_api, tags=("api",))
