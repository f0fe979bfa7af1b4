"""What a worker writes for a task it claimed but will not run: back to the queue, or failed.

Both are compare-and-set writes on the stored row: a task whose claim started
it goes ``starting -> retry_wait -> queued`` (the only way back the table
has) and its claim is released; a task that cannot start here (its
arguments no longer fit, say) ends ``failed`` with a ``launch_error``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from chongming.errors import ChongmingError, StoreUnavailable, VersionConflict
from chongming.state.machine import apply_transition
from chongming.state.records import Failure, FailureKind, TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore

__all__ = ["GIVE_BACK_PATIENCE", "give_back_start", "patiently", "refuse_claim"]

_T = TypeVar("_T")
_log = logging.getLogger("chongming.control")
#: How long giving back a claim (or a start) this node will not run waits for the store.
GIVE_BACK_PATIENCE = 30.0


async def give_back_start(
    store: TaskStore,
    owner: str,
    now: datetime,
    stored: TaskSnapshot,
    *,
    patience: float = GIVE_BACK_PATIENCE,
) -> None:
    """A task its claim started but this node will not launch: back to the queue.

    ``starting -> retry_wait -> queued`` (the only way back the table
    has), then the claim is released, so any worker takes it again.
    While the store is away it is retried for ``patience`` seconds: left
    ``starting`` under this live node, the task would be stranded
    (reconcile leaves a live owner's tasks alone). A closing node does
    not wait (``patience=0``): once it is gone, reconcile takes it over.
    """
    reason = "claimed by a worker that did not launch it"
    waiting, first = apply_transition(
        stored, TaskStatus.RETRY_WAIT, trigger=Trigger.RETRY_SCHEDULED, at=now, reason=reason
    )
    queued, second = apply_transition(  # its next start continues the attempt count
        waiting, TaskStatus.QUEUED, trigger=Trigger.START_GIVEN_BACK, at=now
    )
    task_id = stored.task_id
    try:
        try:
            await patiently(
                lambda: store.save(
                    queued, expect_version=stored.status_version, transitions=[first, second]
                ),
                patience,
            )
        except VersionConflict:
            # A try whose reply was lost may have committed it: go on only if so.
            now_stored = await patiently(lambda: store.get(task_id), patience)
            if now_stored is None or (now_stored.status, now_stored.status_version) != (
                TaskStatus.QUEUED,
                queued.status_version,
            ):
                return  # it moved on without us
        await patiently(
            lambda: store.release_claim(task_id, owner, queued.status_version), patience
        )
    except ChongmingError as error:
        # Still ours in the store: reconcile sees a dead owner's starting task (lost).
        _log.warning("could not give %r back to the queue: %s", task_id, error)


async def refuse_claim(
    store: TaskStore,
    now: datetime,
    stored: TaskSnapshot,
    message: str,
    queued_by: str | None = None,
) -> None:
    """End a claimed task that cannot start: ``starting``, then ``failed`` (launch_error)."""
    failure = Failure(kind=FailureKind.LAUNCH_ERROR, message=message, retryable=False)
    steps = []
    starting = stored
    if stored.status is TaskStatus.QUEUED:  # a claim that started it wrote this one
        starting, first = apply_transition(
            stored, TaskStatus.STARTING, trigger=Trigger.DISPATCH, at=now, queued_by=queued_by
        )
        steps.append(first)
    failed, second = apply_transition(
        starting, TaskStatus.FAILED, trigger=Trigger.FAILED, at=now, reason=message[:500]
    )
    steps.append(second)
    failed_with = dataclasses.replace(failed, failure=failure)
    try:
        await store.save(failed_with, expect_version=stored.status_version, transitions=steps)
    except ChongmingError as error:
        _log.warning("could not record claimed task %r as failed: %s", stored.task_id, error)


async def patiently(call: Callable[[], Awaitable[_T]], patience: float = GIVE_BACK_PATIENCE) -> _T:
    """``call()``, tried again while the store is unreachable, for ``patience`` seconds."""
    loop = asyncio.get_running_loop()  # durations run on the loop's clock (chongming.clock)
    deadline = loop.time() + patience
    delay = 0.1
    while True:
        try:
            return await call()
        except StoreUnavailable:
            if loop.time() + delay > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
