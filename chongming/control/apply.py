"""Commands both ways: addressing one to a task's owner, and applying one claimed here.

Applying goes through the same calls as a local ``stop`` / ``pause`` /
``resume``, so a command can do nothing a local caller could not; the
outcome text is recorded on the command for whoever sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from chongming.errors import TaskNotFound
from chongming.run.defaults import new_task_id
from chongming.stores.base import Command, CommandKind, TaskStore

__all__ = ["apply_command", "send_command"]


async def send_command(
    store: TaskStore,
    kind: CommandKind,
    task_id: str,
    *,
    reason: str | None,
    actor: str,
    at: datetime,
) -> bool:
    """Address a command to the task's owner; False when the store shows it ended."""
    snapshot = await store.get(task_id)
    if snapshot is None:
        raise TaskNotFound(task_id)
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


async def apply_command(
    command: Command, *, held: Callable[[str], Any], store: TaskStore, owner: str
) -> str | None:
    """Apply a claimed command to the run this node holds: its outcome, or None to release it.

    ``held(task_id)`` is the live run or ``None``. A command for a task held
    by another node is released (its holder will claim it); one for a task
    nobody can act on any more is completed with an outcome that says why.
    """
    run = held(command.task_id)
    if run is None:
        snapshot = await store.get(command.task_id)
        if snapshot is None:
            return "unknown task"
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
