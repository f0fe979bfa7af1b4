"""Task module of the graceful-restart proof: ``--tasks tests.cli.restart_tasks``."""

from __future__ import annotations

import time

from chongming import Controller, RetryPolicy, TaskContext
from tests.cli.cli_tasks import mark
from tests.tiers import proof_size


def mark_patiently(ctx: TaskContext, ledger: str, key: str, seconds: float = 0.3) -> str:
    """``mark`` after ``seconds`` of work that checkpoints: a stop ends it before the mark."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.01)
    return mark(ctx, ledger, key)


#: Each restart that lands mid-task spends one attempt of it, and one task may be
#: caught by every restart: a handed-back task is first in claim order again, and
#: the worker that claims it may be the next one restarted (two of 900 tasks used
#: all of 20 attempts at 30 restarts). So: one more than the run's restarts.
ATTEMPTS = proof_size("CHONGMING_QUEUE_RESTARTS", reduced=3, full=30) + 1


def register(controller: Controller) -> None:
    controller.register(
        "mark_patiently", mark_patiently, retry=RetryPolicy(max_attempts=max(20, ATTEMPTS))
    )
