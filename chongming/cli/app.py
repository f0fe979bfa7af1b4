"""The ``chongming`` command: inspect and control tasks through the shared store.

A thin Typer shell over :class:`~chongming.Controller`. Each command runs the
event loop once, opens a query-only controller on ``--db`` (it never
registers as a node), does one thing, prints and exits:

- 0: success;
- 1: the command itself failed (bad arguments, unknown task id, store
  unreachable): one line on stderr, no traceback unless ``--debug``;
- 2: a usage error found by the argument parser (unknown command or flag);
- 3: the command worked but the task it queried did not succeed (``status``
  of a failed, stopped, lost… task), or ``stop``/``pause``/``resume`` of a
  task that had already ended (nothing was sent).

Imports are lazy, so ``chongming --help`` starts without the runtime.
See ``docs/cli.md`` for the commands, their tables and their JSON shapes.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from chongming.cli.session import Options
    from chongming.controller.controller import Controller

__all__ = ["app", "main"]

T = TypeVar("T")

app = typer.Typer(
    name="chongming",
    help="Inspect and control chongming tasks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TaskId = Annotated[str, typer.Argument(help="The task id.", show_default=False)]
Reason = Annotated[str | None, typer.Option("--reason", help="Why (kept in the history).")]


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str,
        typer.Option(
            "--db",
            envvar="CHONGMING_DB",
            help="SQLite path, sqlite:///path, or postgresql:// DSN.",
        ),
    ] = "./chongming.db",
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            envvar="CHONGMING_SCHEMA",
            help="PostgreSQL schema of the plane (default chongming).",
        ),
    ] = None,
    num_buckets: Annotated[int, typer.Option("--num-buckets", help="Buckets in the plane.")] = 64,
    owned_buckets: Annotated[
        str | None,
        typer.Option("--owned-buckets", help="Buckets this node owns, e.g. 0-15,32,40-47."),
    ] = None,
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            envvar="CHONGMING_NODE",
            help="This node's place in a fleet, I/N (0-based): owns the I-th of N "
            "contiguous bucket ranges (buckets_for_node). Not with --owned-buckets.",
        ),
    ] = None,
    owner: Annotated[str | None, typer.Option("--owner", help="This node's owner name.")] = None,
    json: Annotated[bool, typer.Option("--json", help="JSON output for every command.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    """chongming: an asyncio-native task runtime."""
    from chongming.cli.ownership import owned_buckets_of
    from chongming.cli.session import CliError, Options

    try:
        parsed = owned_buckets_of(owned_buckets, node, num_buckets)
        if owner is not None and not owner:
            raise CliError("--owner must not be empty")
    except CliError as error:
        _fail(error, debug)
    ctx.obj = Options(
        db=db,
        schema=schema,
        num_buckets=num_buckets,
        owned_buckets=parsed,
        owner=owner,
        json=json,
        debug=debug,
    )


def _fail(error: BaseException, debug: bool) -> NoReturn:
    from chongming.cli.session import EXIT_FAILED, one_line

    if debug:
        import traceback

        traceback.print_exception(error, file=sys.stderr)
    typer.echo(f"chongming: error: {one_line(str(error))}", err=True)
    raise typer.Exit(EXIT_FAILED)


def _options(ctx: typer.Context, json_flag: bool) -> Options:
    import dataclasses

    options: Options = ctx.obj
    return dataclasses.replace(options, json=options.json or json_flag)


def _run(options: Options, action: Callable[[Controller], Awaitable[T]]) -> T:
    """Run ``action`` on a fresh query-only controller; errors become exit code 1."""
    from chongming.cli.session import CliError, run_with_controller
    from chongming.errors import ChongmingError

    try:
        return run_with_controller(options, action)
    except (CliError, ChongmingError, OSError) as error:
        _fail(error, options.debug)


def _emit(options: Options, data: dict[str, Any], text: Callable[[], str]) -> None:
    if options.json:
        import json

        typer.echo(json.dumps(data, ensure_ascii=False, sort_keys=False))
    else:
        typer.echo(text())


def _checked_id(options: Options, task_id: str) -> str:
    from chongming.cli.session import CliError, check_id

    try:
        return check_id(task_id)
    except CliError as error:
        _fail(error, options.debug)


# -- queries -------------------------------------------------------------------------


@app.command()
def ps(
    ctx: typer.Context,
    all_tasks: Annotated[bool, typer.Option("--all", help="Finished tasks too.")] = False,
    mine: Annotated[
        bool, typer.Option("--mine", help="Only tasks of --owner and/or --owned-buckets.")
    ] = False,
    status: Annotated[
        list[str] | None, typer.Option("--status", help="Only this status (repeatable).")
    ] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Only tasks with this tag.")] = None,
    bucket: Annotated[int | None, typer.Option("--bucket", help="Only this bucket.")] = None,
    owner: Annotated[str | None, typer.Option("--owner", help="Only tasks of this owner.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="At most N tasks.")] = None,
    json_flag: JsonFlag = False,
) -> None:
    """List tasks (unfinished only, unless --all or --status)."""
    from chongming.cli.session import CliError

    options = _options(ctx, json_flag)
    try:
        query = _task_query(options, all_tasks, mine, status, tag, bucket, owner, limit)
    except CliError as error:
        _fail(error, options.debug)

    async def action(controller: Controller) -> None:
        from chongming.cli import views
        from chongming.stores.nodes import served_by_live_nodes

        snapshots = await controller.list_tasks(query)
        matching = None
        if query.limit is not None and len(snapshots) >= query.limit:
            matching = await _matching(controller, query)
        waiting = [s for s in snapshots if s.status.value == "queued" and s.owner is None]
        served = served_by_live_nodes(await controller.nodes()) if waiting else frozenset()
        unserved = views.unserved(waiting, served)
        reasons = await _waiting(controller, waiting)
        _emit(
            options,
            views.ps_json(snapshots, unserved, matching=matching, waiting=reasons),
            lambda: views.ps_text(snapshots, unserved=unserved, matching=matching, waiting=reasons),
        )

    _run(options, action)


async def _waiting(controller: Controller, snapshots: Any) -> Any:
    """Why each queued task among ``snapshots`` waits (by the store's clock)."""
    from chongming.control.waiting import waiting_reasons

    store = controller.store
    if store is None or not snapshots:
        return {}
    return await waiting_reasons(store, snapshots, now=await store.store_time())


async def _matching(controller: Controller, query: Any) -> Any:
    """Tasks per status of every match of a limited ``ps``: its footer counts all of them."""
    import dataclasses

    from chongming.cli import views

    store = controller.store
    assert store is not None
    found = views.matching_counts(await store.task_counts(), query)
    if found is None:  # a tag or name filter: count the matches themselves
        found = {}
        for snapshot in await controller.list_tasks(dataclasses.replace(query, limit=None)):
            found[snapshot.status] = found.get(snapshot.status, 0) + 1
    return found


def _task_query(
    options: Options,
    all_tasks: bool,
    mine: bool,
    status: list[str] | None,
    tag: str | None,
    bucket: int | None,
    owner: str | None,
    limit: int | None,
) -> Any:
    from chongming.cli.session import CliError
    from chongming.errors import ConfigurationError
    from chongming.state.query import TaskQuery
    from chongming.state.status import ACTIVE_STATUSES

    buckets = None
    if mine:
        if options.owner is None and options.owned_buckets is None:
            raise CliError("--mine needs the global --owner or --owned-buckets")
        if owner is None:
            owner = options.owner
        buckets = options.owned_buckets
    if limit is not None and limit < 1:
        raise CliError(f"--limit must be at least 1, got {limit}")
    statuses: Any = status if status else (None if all_tasks else ACTIVE_STATUSES)
    try:
        return TaskQuery(
            statuses=None if statuses is None else frozenset(statuses),
            tag=tag,
            bucket=bucket,
            buckets=buckets,
            owner=owner,
            limit=limit,
        )
    except ConfigurationError as error:
        raise CliError(str(error)) from None


@app.command()
def status(ctx: typer.Context, task_id: TaskId, json_flag: JsonFlag = False) -> None:
    """Show one task. Exit code 3 when it ended without succeeding."""
    from chongming.cli.session import EXIT_OK, EXIT_TASK_UNSUCCESSFUL
    from chongming.state.status import TaskStatus

    options = _options(ctx, json_flag)
    task_id = _checked_id(options, task_id)

    async def action(controller: Controller) -> int:
        from chongming.cli import views

        snapshot = await controller.get(task_id)
        waiting = (await _waiting(controller, [snapshot])).get(task_id)
        family = await _family(controller, task_id)
        _emit(
            options,
            views.status_json(snapshot, waiting, family),
            lambda: views.status_text(snapshot, waiting=waiting, family=family),
        )
        unsuccessful = snapshot.is_terminal and snapshot.status is not TaskStatus.SUCCEEDED
        return EXIT_TASK_UNSUCCESSFUL if unsuccessful else EXIT_OK

    raise typer.Exit(_run(options, action))


async def _family(controller: Controller, task_id: str) -> tuple[str | None, list[str]]:
    """A task's parent and children (``ctx.child``), where the store keeps them."""
    store = controller.store
    if store is None:
        return None, []
    try:
        return await store.parent_of(task_id), await store.children_of(task_id)
    except NotImplementedError:
        return None, []


@app.command()
def history(ctx: typer.Context, task_id: TaskId, json_flag: JsonFlag = False) -> None:
    """A task's transitions: VER FROM TO AT TRIGGER ACTOR REASON."""
    options = _options(ctx, json_flag)
    task_id = _checked_id(options, task_id)

    async def action(controller: Controller) -> None:
        from chongming.cli import views

        transitions = await controller.history(task_id)
        _emit(
            options,
            views.history_json(task_id, transitions),
            lambda: views.history_text(transitions),
        )

    _run(options, action)


@app.command()
def stats(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Task counts in the store, by status and by owner."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        from chongming.cli import views

        store = controller.store
        assert store is not None
        data = views.stats_json(await store.task_counts())
        _emit(options, data, lambda: views.stats_text(data))

    _run(options, action)


@app.command()
def buckets(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Tasks per bucket with their live owners; * marks --owned-buckets."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        from chongming.cli import views

        report = await controller.bucket_report()
        owned = options.owned_buckets
        _emit(
            options,
            views.buckets_json(report, owned),
            lambda: views.buckets_text(report, owned),
        )

    _run(options, action)


@app.command()
def nodes(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Live and expired nodes, their buckets and last renewal."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        from chongming.cli import views

        records = await controller.nodes()
        _emit(options, views.nodes_json(records), lambda: views.nodes_text(records))

    _run(options, action)


@app.command()
def commands(
    ctx: typer.Context,
    task_id: Annotated[
        str | None, typer.Argument(help="Only this task's commands.", show_default=False)
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most N commands.")] = 100,
    json_flag: JsonFlag = False,
) -> None:
    """Recent commands (newest first) and their recorded outcomes."""
    options = _options(ctx, json_flag)
    if task_id is not None:
        task_id = _checked_id(options, task_id)
    if limit < 1:
        _fail(ValueError(f"--limit must be at least 1, got {limit}"), options.debug)

    async def action(controller: Controller) -> None:
        from chongming.cli import views

        store = controller.store
        assert store is not None
        records = await store.command_records(task_id=task_id, limit=limit)
        _emit(options, views.commands_json(records), lambda: views.commands_text(records))

    _run(options, action)


# -- control -------------------------------------------------------------------------


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
        from chongming.cli import views

        report = await controller.reconcile(dry_run=dry_run, reason=reason)
        _emit(options, views.reconcile_json(report), lambda: views.reconcile_text(report))

    _run(options, action)


@app.command()
def version(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Print the installed version (``--json``: ``{"version": "…"}``)."""
    from importlib.metadata import version as installed_version

    number = installed_version("chongming")
    _emit(_options(ctx, json_flag), {"version": number}, lambda: number)


def main() -> None:
    app(prog_name="chongming")


# The commands that load a task module live in their own module; importing it
# registers them on ``app`` (it needs the helpers above, so it comes last).
from chongming.cli import dashboard_command as _dashboard_command  # noqa: E402, F401
from chongming.cli import limit_commands as _limit_commands  # noqa: E402, F401
from chongming.cli import pipeline_commands as _pipeline_commands  # noqa: E402, F401
from chongming.cli import prune_commands as _prune_commands  # noqa: E402, F401
from chongming.cli import schedule_commands as _schedule_commands  # noqa: E402, F401
from chongming.cli import task_commands as _task_commands  # noqa: E402, F401
