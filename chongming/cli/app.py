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

This module is the shell every command shares: the Typer ``app``, the
global options and the helpers that run a controller, print and fail. The
commands are in modules of their own (``query_commands``,
``control_commands``, ``task_commands``…), registered on ``app`` when this
module imports them at its end. Imports are lazy, so ``chongming --help``
starts without the runtime.
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
    # Plain help and usage errors: typer's rich formatter costs ~100 ms of imports
    # (rich, markdown-it) on every `--help` and every mistyped command (goal <= 150 ms).
    rich_markup_mode=None,
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


def main() -> None:
    app(prog_name="chongming")


# Every command but ``version`` lives in a module of its own; importing it
# registers its commands on ``app`` (it needs the helpers above, so it comes
# last). ``--help`` lists them in the order they register: the queries, the
# controls, ``version``, then the rest.
from chongming.cli import query_commands as _query_commands  # noqa: E402, F401

# isort: split
from chongming.cli import control_commands as _control_commands  # noqa: E402, F401


@app.command()
def version(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Print the installed version (``--json``: ``{"version": "…"}``)."""
    from importlib.metadata import version as installed_version

    number = installed_version("chongming")
    _emit(_options(ctx, json_flag), {"version": number}, lambda: number)


from chongming.cli import dashboard_command as _dashboard_command  # noqa: E402, F401
from chongming.cli import limit_commands as _limit_commands  # noqa: E402, F401
from chongming.cli import pipeline_commands as _pipeline_commands  # noqa: E402, F401
from chongming.cli import prune_commands as _prune_commands  # noqa: E402, F401
from chongming.cli import schedule_commands as _schedule_commands  # noqa: E402, F401
from chongming.cli import task_commands as _task_commands  # noqa: E402, F401
