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
from pathlib import Path
from typing import Any

from chongming import Controller
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
    lines: list[str] = []

    def recorded(real: Any, ids_of: Any) -> Any:
        async def call(owner: str, **options: Any) -> Any:
            sent = time.monotonic_ns()
            limit = options.get("limit", 1)
            try:
                taken = await real(owner, **options)
            except BaseException as error:
                lines.append(f"error {sent} {time.monotonic_ns()} {limit} {type(error).__name__}\n")
                raise
            ids = ",".join(ids_of(task) for task in taken)
            lines.append(f"claim {sent} {time.monotonic_ns()} {limit} {ids}\n")
            return taken

        return call

    # A worker claims with claim() under limits and with claim_started() (claim and
    # start in one step) when its admission launches at once: note both alike.
    setattr(store, "claim", recorded(store.claim, lambda task: task.task_id))  # noqa: B010
    setattr(  # noqa: B010 (mypy refuses assigning to a method)
        store, "claim_started", recorded(store.claim_started, lambda task: task.snapshot.task_id)
    )

    def write() -> None:
        (directory / f"claims-{os.getpid()}.txt").write_text("".join(lines))

    atexit.register(write)
