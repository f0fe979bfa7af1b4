"""``chongming schedules [ls|pause|resume|trigger|rm]``: the schedules a store keeps.

Registered on the same Typer ``app`` as the other commands (imported by
:mod:`chongming.cli.app` at its end). ``chongming schedules`` alone lists.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from chongming.cli.app import JsonFlag, _emit, _options, _run, app

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.stores.schedules import ScheduleRecord

__all__ = ["describe", "schedules_app"]

schedules_app = typer.Typer(
    help="Schedules: list them, pause, resume, trigger one now, remove one.",
    no_args_is_help=False,
    invoke_without_command=True,
)
app.add_typer(schedules_app, name="schedules")

KeyArgument = Annotated[str, typer.Argument(help="The schedule's key (see `schedules ls`).")]


def describe(record: ScheduleRecord) -> str:
    from chongming.schedules.loop import describe_schedule

    return describe_schedule(record)


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _record_json(record: ScheduleRecord) -> dict[str, Any]:
    return {
        "key": record.key,
        "task": record.task_name,
        "cron": record.cron,
        "every_seconds": None if record.every is None else record.every.total_seconds(),
        "timezone": record.timezone,
        "description": describe(record),
        "catch_up": record.catch_up,
        "paused": record.paused,
        "next_fire": record.next_fire.isoformat(),
        "last_fired": None if record.last_fired is None else record.last_fired.isoformat(),
        "args": list(record.args),
        "kwargs": dict(record.kwargs),
    }


def _as_text(found: list[ScheduleRecord]) -> str:
    from chongming.render.table import render_rows

    if not found:
        return "no schedules (add one: controller.schedule(...) or @task(schedule=...))"
    rows = [
        (
            record.key,
            record.task_name,
            describe(record),
            "paused" if record.paused else "active",
            "-" if record.paused else _when(record.next_fire),
            _when(record.last_fired),
            record.catch_up,
        )
        for record in found
    ]
    return render_rows(
        ("KEY", "TASK", "CADENCE", "STATE", "NEXT FIRE", "LAST FIRED", "CATCH-UP"), rows
    )


def _list(ctx: typer.Context, json_flag: bool) -> None:
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        found = await controller.schedules()
        _emit(options, {"schedules": [_record_json(r) for r in found]}, lambda: _as_text(found))

    _run(options, action)


@schedules_app.callback()
def schedules(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Schedules: key, task, cadence in words, next fire time (``ls`` when no command)."""
    if ctx.invoked_subcommand is None:
        _list(ctx, json_flag)


@schedules_app.command("ls")
def list_schedules(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Every schedule with its cadence in words and its next fire time."""
    _list(ctx, json_flag)


@schedules_app.command("pause")
def pause(ctx: typer.Context, key: KeyArgument, json_flag: JsonFlag = False) -> None:
    """Fire nothing until resumed."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        record = await controller.pause_schedule(key)
        _emit(options, _record_json(record), lambda: f"paused {record.key}")

    _run(options, action)


@schedules_app.command("resume")
def resume(ctx: typer.Context, key: KeyArgument, json_flag: JsonFlag = False) -> None:
    """Fire again from the next tick (ticks due while paused are skipped)."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        record = await controller.resume_schedule(key)
        _emit(
            options,
            _record_json(record),
            lambda: f"resumed {record.key}; next fire {_when(record.next_fire)}",
        )

    _run(options, action)


@schedules_app.command("trigger")
def trigger(ctx: typer.Context, key: KeyArgument, json_flag: JsonFlag = False) -> None:
    """Enqueue one run now, off the cadence (its ticks are untouched)."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        queued = await controller.trigger_schedule(key)
        _emit(
            options,
            {"key": key, "task_id": queued.task_id},
            lambda: f"enqueued {queued.task_id} for {key}",
        )

    _run(options, action)


@schedules_app.command("rm")
def remove(ctx: typer.Context, key: KeyArgument, json_flag: JsonFlag = False) -> None:
    """Delete a schedule (what it enqueued stays)."""
    from chongming.errors import UnknownSchedule

    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        if not await controller.remove_schedule(key):
            raise UnknownSchedule(key)
        _emit(options, {"key": key, "removed": True}, lambda: f"removed {key}")

    _run(options, action)
