"""The commands that read the store: ``ps``, ``status``, ``history``, ``stats``, and more.

``buckets``, ``nodes`` and ``commands`` too. Each reads the store through a
query-only controller and prints a table or (``--json``) the shapes of
docs/cli.md; none writes. Registered on the same Typer ``app`` as the other
commands (imported by :mod:`chongming.cli.app` at its end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from chongming.cli.app import JsonFlag, TaskId, _checked_id, _emit, _fail, _options, _run, app

if TYPE_CHECKING:
    from chongming.cli.session import Options
    from chongming.controller.controller import Controller

__all__ = ["buckets", "commands", "history", "nodes", "ps", "stats", "status"]


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
    from chongming.plane.waiting import waiting_reasons

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
        from chongming.cli import plane_views

        report = await controller.bucket_report()
        owned = options.owned_buckets
        _emit(
            options,
            plane_views.buckets_json(report, owned),
            lambda: plane_views.buckets_text(report, owned),
        )

    _run(options, action)


@app.command()
def nodes(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """Live and expired nodes, their buckets and last renewal."""
    options = _options(ctx, json_flag)

    async def action(controller: Controller) -> None:
        from chongming.cli import plane_views

        records = await controller.nodes()
        _emit(options, plane_views.nodes_json(records), lambda: plane_views.nodes_text(records))

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
        from chongming.cli import plane_views

        store = controller.store
        assert store is not None
        records = await store.command_records(task_id=task_id, limit=limit)
        _emit(
            options, plane_views.commands_json(records), lambda: plane_views.commands_text(records)
        )

    _run(options, action)
