"""The control commands: ``stop``, ``pause``, ``resume`` of one task, and ``reconcile``.

``stop`` / ``pause`` / ``resume`` send a command the task's owner applies
(exit 3 when the task had already ended: nothing was sent); ``reconcile``
judges unfinished tasks by their owners' leases. Registered on the same
Typer ``app`` as the other commands (imported by :mod:`chongming.cli.app` at
its end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from chongming.cli.app import JsonFlag, Reason, TaskId, _checked_id, _emit, _options, _run, app

if TYPE_CHECKING:
    from chongming.controller.controller import Controller

__all__ = ["pause", "reconcile", "resume", "stop"]


def _control(
    ctx: typer.Context, kind: str, task_id: str, reason: str | None, json_flag: bool
) -> None:
    from chongming.cli.session import EXIT_OK, EXIT_TASK_UNSUCCESSFUL

    options = _options(ctx, json_flag)
    task_id = _checked_id(options, task_id)

    async def action(controller: Controller) -> int:
        from chongming.cli import views

        snapshot = await controller.get(task_id)
        issued = False
        if not snapshot.is_terminal:
            if kind == "stop":
                issued = await controller.stop(task_id, reason=reason)
            elif kind == "pause":
                await controller.pause(task_id, reason=reason)
                issued = True
            else:
                await controller.resume(task_id, reason=reason)
                issued = True
            snapshot = await controller.get(task_id)
        if issued and snapshot.status.value == "stopped":
            text = f"{task_id} stopped (nobody held it: written to the store)"
        elif issued:
            text = f"{kind} requested for {task_id} (addressed to {snapshot.owner or 'any node'})"
        else:
            text = f"{task_id} already ended ({snapshot.status.value}); nothing sent"
        _emit(options, views.control_json(kind, snapshot, issued), lambda: _escaped(text))
        return EXIT_OK if issued else EXIT_TASK_UNSUCCESSFUL

    raise typer.Exit(_run(options, action))


def _escaped(text: str) -> str:
    from chongming.render import escape_text

    return escape_text(text)


@app.command()
def stop(
    ctx: typer.Context, task_id: TaskId, reason: Reason = None, json_flag: JsonFlag = False
) -> None:
    """Ask a task to stop (its owner applies it). Exit 3 if it had already ended."""
    _control(ctx, "stop", task_id, reason, json_flag)


@app.command()
def pause(
    ctx: typer.Context, task_id: TaskId, reason: Reason = None, json_flag: JsonFlag = False
) -> None:
    """Ask a task to pause at its next checkpoint. Exit 3 if it had already ended."""
    _control(ctx, "pause", task_id, reason, json_flag)


@app.command()
def resume(
    ctx: typer.Context, task_id: TaskId, reason: Reason = None, json_flag: JsonFlag = False
) -> None:
    """Ask a paused task to resume. Exit 3 if it had already ended."""
    _control(ctx, "resume", task_id, reason, json_flag)


@app.command()
def reconcile(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report only; write nothing.")] = False,
    reason: Reason = None,
    json_flag: JsonFlag = False,
) -> None:
    """Judge unfinished tasks by their owners' leases: OUTCOME TASK_ID WAS DETAIL."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        from chongming.cli import plane_views

        report = await controller.reconcile(dry_run=dry_run, reason=reason)
        _emit(
            options, plane_views.reconcile_json(report), lambda: plane_views.reconcile_text(report)
        )

    _run(options, action)
