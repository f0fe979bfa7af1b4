"""``chongming prune``: delete terminal tasks older than an age, in bounded batches.

Registered on the same Typer ``app`` as the other commands (imported by
:mod:`chongming.cli.app` at its end). Every argument is checked before the
store is opened, so bad input deletes nothing; tasks named with ``--id`` are
all checked before the first delete (docs/retention.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from chongming.cli.app import JsonFlag, _emit, _fail, _options, _run, app

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.plane.pruner import PruneReport
    from chongming.state.status import TaskStatus
    from chongming.stores.base import TaskStore
    from chongming.stores.retention import Retention

__all__ = ["PruneRequest", "check_prune_request", "prune", "retention_of"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PruneRequest:
    """A checked ``chongming prune`` command line."""

    older_than: timedelta
    statuses: frozenset[TaskStatus]
    names: frozenset[str] | None
    task_ids: frozenset[str] | None
    batch: int
    window: timedelta
    dry_run: bool


def check_prune_request(
    *,
    older_than: str,
    statuses: Sequence[str],
    names: Sequence[str],
    task_ids: Sequence[str],
    batch: int,
    window: str,
    dry_run: bool,
) -> PruneRequest:
    """Every option checked, each error naming its flag (:class:`InvalidRetention`)."""
    from chongming.errors import InvalidRetention
    from chongming.state.payload import check_task_id
    from chongming.state.status import TERMINAL_STATUSES
    from chongming.stores.retention import check_batch, check_window, parse_age, parse_statuses

    age = parse_age(older_than, field="--older-than")
    idempotency = parse_age(window, field="--idempotency-window")
    check_window(age, idempotency, field="--older-than")
    wanted = parse_statuses(statuses, field="--status") if statuses else TERMINAL_STATUSES
    for name in names:
        if not name.strip():
            raise InvalidRetention("--name", "an empty task name", "give a registered name")
    ids = []
    for task_id in task_ids:
        try:
            ids.append(check_task_id(task_id))
        except ValueError as error:
            raise InvalidRetention("--id", str(error), "give a stored task id") from None
    return PruneRequest(
        older_than=age,
        statuses=wanted,
        names=frozenset(names) if names else None,
        task_ids=frozenset(ids) if ids else None,
        batch=check_batch(batch, field="--batch"),
        window=idempotency,
        dry_run=dry_run,
    )


def retention_of(terminal: str | None, failed: str | None) -> Retention | None:
    """``chongming worker --retention 7d [--retention-failed 30d]`` as a :class:`Retention`."""
    from chongming.stores.retention import Retention, parse_age

    if terminal is None and failed is None:
        return None
    kept = parse_age(terminal, field="--retention") if terminal is not None else None
    if failed is None:
        return Retention(terminal=check_window_of("--retention", kept))
    kept_failed = check_window_of(
        "--retention-failed", parse_age(failed, field="--retention-failed")
    )
    return Retention(terminal=check_window_of("--retention", kept), failed=kept_failed)


def check_window_of(flag: str, period: timedelta | None) -> timedelta | None:
    """``period`` if the default idempotency window allows it, else the error naming ``flag``."""
    from chongming.stores.retention import DEFAULT_IDEMPOTENCY_WINDOW, check_window

    if period is not None:
        check_window(period, DEFAULT_IDEMPOTENCY_WINDOW, field=flag)
    return period


@app.command()
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str, typer.Option("--older-than", help="Finished longer ago than this: 90s, 30m, 12h, 7d.")
    ] = "7d",
    status: Annotated[
        list[str] | None,
        typer.Option("--status", help="Only tasks that ended so (a terminal status; may repeat)."),
    ] = None,
    name: Annotated[
        list[str] | None, typer.Option("--name", help="Only tasks of this name (may repeat).")
    ] = None,
    task_id: Annotated[
        list[str] | None,
        typer.Option("--id", help="Only this task; it must be terminal and old enough."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")
    ] = False,
    batch: Annotated[int, typer.Option("--batch", help="Tasks per delete statement.")] = 1000,
    idempotency_window: Annotated[
        str,
        typer.Option(
            "--idempotency-window",
            help="How long a finished task's idempotency key must still answer "
            "(--older-than may not be shorter).",
        ),
    ] = "1d",
    json_flag: JsonFlag = False,
) -> None:
    """Delete terminal tasks (with their history, steps, facts, keys…) finished before an age."""
    from chongming.errors import ChongmingError

    options = _options(ctx, json_flag)
    try:
        request = check_prune_request(
            older_than=older_than,
            statuses=status or (),
            names=name or (),
            task_ids=task_id or (),
            batch=batch,
            window=idempotency_window,
            dry_run=dry_run,
        )
    except ChongmingError as error:
        _fail(error, options.debug)

    async def action(controller: Controller) -> None:
        report = await run_prune(controller, request)
        _emit(options, _as_json(request, report), lambda: _as_text(request, report))

    _run(options, action)


async def run_prune(controller: Controller, request: PruneRequest) -> PruneReport:
    """Apply a checked request through the controller's store; what it did."""
    from chongming.cli.session import CliError
    from chongming.clock import to_datetime
    from chongming.plane.pruner import prune_store
    from chongming.stores.retention import PruneSelection

    store = controller.store
    assert store is not None  # the CLI's controller always has one
    cut = to_datetime(controller.clock.time()) - request.older_than
    if request.task_ids is not None:
        await _check_named(store, request.task_ids, cut)
    rule = PruneSelection(
        finished_before=cut,
        statuses=request.statuses,
        names=request.names,
        task_ids=request.task_ids,
    )
    try:
        return await prune_store(store, [rule], batch=request.batch, dry_run=request.dry_run)
    except NotImplementedError:
        raise CliError(f"{type(store).__name__} cannot prune") from None


async def _check_named(store: TaskStore, task_ids: frozenset[str], cut: datetime) -> None:
    """Every task named by ``--id`` exists, is terminal, finished before ``cut`` and has
    no child still alive."""
    from chongming.errors import TaskNotFound, TaskNotPrunable

    for task_id in sorted(task_ids):
        snapshot = await store.get(task_id)
        if snapshot is None:
            raise TaskNotFound(task_id)
        if not snapshot.status.is_terminal:
            raise TaskNotPrunable(task_id, f"is {snapshot.status}, not terminal")
        if snapshot.finished_at is None or snapshot.finished_at >= cut:
            raise TaskNotPrunable(task_id, f"finished after the cut ({cut.isoformat()})")
        try:
            children = await store.children_of(task_id)
        except NotImplementedError:
            children = []
        for child in children:
            found = await store.get(child)
            if found is not None and not found.status.is_terminal:
                raise TaskNotPrunable(task_id, f"its child {child!r} is {found.status}")


def _as_json(request: PruneRequest, report: PruneReport) -> dict[str, Any]:
    from chongming.stores.retention import format_age

    return {
        "dry_run": report.dry_run,
        "tasks": report.tasks,
        "batches": report.batches,
        "seconds": round(report.seconds, 3),
        "older_than": format_age(request.older_than),
        "statuses": sorted(request.statuses),
        "names": None if request.names is None else sorted(request.names),
    }


def _as_text(request: PruneRequest, report: PruneReport) -> str:
    from chongming.stores.retention import format_age

    age = format_age(request.older_than)
    if report.dry_run:
        return f"would prune {report.tasks} terminal tasks finished over {age} ago (dry run)"
    return (
        f"pruned {report.tasks} terminal tasks finished over {age} ago"
        f" in {report.batches} batches ({report.seconds:.2f} s)"
    )
