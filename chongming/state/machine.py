"""Applying one transition to a snapshot: the pure form of the state machine.

``TaskRun`` applies transitions on its hot path with the same rules; this
function is for everything that moves a *stored* snapshot (reconcile, tools,
tests): check the table, bump ``status_version`` by exactly one, stamp the
timestamps, and return the snapshot together with the transition that records
the move, so the two are always written together.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from chongming.state.attempts import starts_attempt
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.state.table import check_transition

__all__ = ["apply_transition"]


def apply_transition(
    snapshot: TaskSnapshot,
    target: TaskStatus,
    *,
    trigger: str,
    at: datetime,
    actor: str = "system",
    reason: str | None = None,
    queued_by: str | None = None,
) -> tuple[TaskSnapshot, Transition]:
    """The snapshot after ``snapshot.status -> target`` and the transition recording it.

    Raises :class:`~chongming.errors.InvalidTransition` when the table forbids
    the move. Entering ``starting`` begins a new attempt, unless the task was
    queued (``queued_by``: that transition's trigger) by a park or a resume,
    which continue the attempt they interrupted (:mod:`chongming.state.attempts`).
    """
    check_transition(snapshot.status, target)
    version = snapshot.status_version + 1
    attempt = snapshot.attempt
    if target is TaskStatus.STARTING and starts_attempt(queued_by):
        attempt += 1
    transition = Transition(
        task_id=snapshot.task_id,
        version=version,
        from_status=snapshot.status,
        to_status=target,
        at=at,
        trigger=trigger,
        actor=actor,
        reason=reason,
        attempt=attempt,
    )
    first_queued = target is TaskStatus.QUEUED and snapshot.queued_at is None
    first_started = target is TaskStatus.RUNNING and snapshot.started_at is None
    updated = dataclasses.replace(
        snapshot,
        status=target,
        status_version=version,
        attempt=attempt,
        updated_at=at,
        queued_at=at if first_queued else snapshot.queued_at,
        started_at=at if first_started else snapshot.started_at,
        finished_at=at if target.is_terminal else snapshot.finished_at,
    )
    return updated, transition
