"""The worker task module of the queue load proof: ``cli_tasks``, and a record of every claim.

With ``CHONGMING_TEST_CLAIM_LOG`` naming a directory, ``register`` wraps the
worker's store so each claim call is noted: the monotonic clock before it was
sent and after it returned, the limit asked for, and the task ids it took (an
empty claim too: it says there was nothing to take). The notes stay in memory
(the event loop is never blocked on a file) and are written to
``claims-<pid>.txt`` when the process exits. The wrapper only observes: it
passes every call through unchanged.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Collection
from pathlib import Path

from chongming import Controller
from chongming.state.records import TaskSnapshot
from chongming.stores.queue import Serves
from tests.cli import cli_tasks

CLAIM_LOG = "CHONGMING_TEST_CLAIM_LOG"


def register(controller: Controller) -> None:
    cli_tasks.register(controller)
    directory = os.environ.get(CLAIM_LOG)
    if directory:
        _record_claims(controller, Path(directory))


def _record_claims(controller: Controller, directory: Path) -> None:
    store = controller.store
    assert store is not None, "a worker has a store"
    real = store.claim
    lines: list[str] = []

    async def claim(
        owner: str, *, serves: Serves, buckets: Collection[int] | None = None, limit: int = 1
    ) -> list[TaskSnapshot]:
        sent = time.monotonic_ns()
        try:
            taken = await real(owner, serves=serves, buckets=buckets, limit=limit)
        except BaseException as error:
            lines.append(f"error {sent} {time.monotonic_ns()} {limit} {type(error).__name__}\n")
            raise
        ids = ",".join(task.task_id for task in taken)
        lines.append(f"claim {sent} {time.monotonic_ns()} {limit} {ids}\n")
        return taken

    def write() -> None:
        (directory / f"claims-{os.getpid()}.txt").write_text("".join(lines))

    setattr(store, "claim", claim)  # noqa: B010 (mypy refuses assigning to a method)
    atexit.register(write)
