"""Task module of the graceful-restart proof: ``--tasks tests.cli.restart_tasks``."""

from __future__ import annotations

import time

from chongming import Controller, RetryPolicy, TaskContext
from tests.cli.cli_tasks import mark


def mark_patiently(ctx: TaskContext, ledger: str, key: str, seconds: float = 0.3) -> str:
    """``mark`` after ``seconds`` of work that checkpoints: a stop ends it before the mark."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.01)
    return mark(ctx, ledger, key)


def register(controller: Controller) -> None:
    # Attempts to spare: each restart that lands mid-task spends one.
    controller.register("mark_patiently", mark_patiently, retry=RetryPolicy(max_attempts=20))
