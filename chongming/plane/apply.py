"""Commands both ways: addressing one to a task's owner, and applying one claimed here.

Applying goes through the same calls as a local ``stop`` / ``pause`` /
``resume``, so a command can do nothing a local caller could not; the
outcome text is recorded on the command for whoever sent it.

A stop of a task that nobody holds — ``queued`` with no owner (enqueued and
not claimed yet, ``not_before`` in the future, a durable task parked in a
long sleep or a fact wait) or with an owner whose node lease has lapsed —
is not a command at all: no node would ever apply it, and the task would
later be claimed and run. It is written at once, ``queued -> stopped``
(``user:stop``), as one compare-and-set on the version read; a claim that
took the task meanwhile makes the write miss, and the stop then goes to the
new holder as a command. ``True`` therefore always means the store says
``stopped`` already or a live holder was asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from chongming.errors import TaskNotFound, VersionConflict
from chongming.state.ids import new_task_id
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from chongming.stores.nodes import Command, CommandKind

__all__ = ["apply_command", "send_command", "stop_unheld"]


async def send_command(
    store: TaskStore,
    kind: CommandKind,
    task_id: str,
    *,
    reason: str | None,
    actor: str,
    at: datetime,
) -> bool:
    """Address a command to the task's owner; False when the store shows it ended.

    A stop of a queued task nobody holds is written, not sent (see the module docstring).
    """
    snapshot = await store.get(task_id)
    if snapshot is None:
        raise TaskNotFound(task_id)
    if kind is CommandKind.STOP:
        snapshot, written = await stop_unheld(store, snapshot, reason=reason, actor=actor, at=at)
        if written:
            return True
    if snapshot.is_terminal:
        return False
    await store.submit_command(
        Command(
            command_id=new_task_id(),
            task_id=task_id,
            kind=kind,
            created_at=at,
            actor=actor,
            reason=reason,
            target_owner=snapshot.owner,
        )
    )
    return True


async def stop_unheld(
    store: TaskStore, snapshot: TaskSnapshot, *, reason: str | None, actor: str, at: datetime
) -> tuple[TaskSnapshot, bool]:
    """Write ``queued -> stopped`` while nobody holds the task; whether it was written.

    A claim that takes the task meanwhile makes the write miss; the answer
    is then the task as it is now, unwritten (its holder gets a command).
    """
    while await _unheld(store, snapshot):
        stopped, transition = apply_transition(
            snapshot,
            TaskStatus.STOPPED,
            trigger=Trigger.USER_STOP,
            at=at,
            actor=actor,
            reason=reason,
        )
        try:
            await store.save(
                dataclasses.replace(stopped, owner=None),
                expect_version=snapshot.status_version,
                transitions=[transition],
            )
            return stopped, True
        except VersionConflict:
            pass  # claimed (or moved) meanwhile: judge it again as it is now
        now = await store.get(snapshot.task_id)
        if now is None:
            raise TaskNotFound(snapshot.task_id)
        if (now.status, now.status_version) == (TaskStatus.STOPPED, stopped.status_version):
            return now, True  # our write landed; its reply was lost
        snapshot = now
    return snapshot, False


async def _unheld(store: TaskStore, snapshot: TaskSnapshot) -> bool:
    """``queued`` with no owner, or with an owner whose node lease is not live."""
    if snapshot.status is not TaskStatus.QUEUED:
        return False
    if snapshot.owner is None:
        return True
    live = {node.info.owner for node in await store.nodes() if node.live}
    return snapshot.owner not in live


async def apply_command(
    command: Command,
    *,
    held: Callable[[str], Any],
    store: TaskStore,
    owner: str,
    at: Callable[[], datetime],
) -> str | None:
    """Apply a claimed command to the run this node holds: its outcome, or None to release it.

    ``held(task_id)`` is the live run or ``None``. A command for a task held
    by another node is released (its holder will claim it); one for a task
    nobody can act on any more is completed with an outcome that says why.
    A stop that finds the task held by nobody any more (it parked, or was
    handed back, after the command was sent) is written as a stop of an
    unheld task is (module docstring): nobody else would ever apply it.
    """
    run = held(command.task_id)
    if run is None:
        snapshot = await store.get(command.task_id)
        if snapshot is None:
            return "unknown task"
        if snapshot.is_terminal:
            return f"already terminal ({snapshot.status})"
        if command.kind is CommandKind.STOP:
            snapshot, written = await stop_unheld(
                store, snapshot, reason=command.reason, actor=command.actor, at=at()
            )
            if written:
                return "applied: stopped (nobody held it any more)"
            if snapshot.is_terminal:
                return f"already terminal ({snapshot.status})"
        if snapshot.owner != owner:
            return None
        return "not held by this node (left by an earlier process of this owner?)"
    if run.done:
        return f"already terminal ({run.status})"
    if command.kind is CommandKind.STOP:
        issued = await run.stop(reason=command.reason, actor=command.actor)
        return "applied: stopping" if issued else f"no effect ({run.status})"
    if command.kind is CommandKind.PAUSE:
        paused = await run.pause(reason=command.reason, actor=command.actor)
        return "applied: paused" if paused else f"not reached: rolled back ({run.status})"
    resumed = await run.resume(reason=command.reason, actor=command.actor)
    return "applied: resumed" if resumed else f"not paused ({run.status})"
