"""``chongming pipelines [RUN_ID]``: stored pipelines, and one of them as a graph.

Registered on the same Typer ``app`` as the other commands (imported by
:mod:`chongming.cli.app` at its end). Without ``RUN_ID``: one row per run,
newest first. With it: each node in graph order with its status, what it
waits for (``<-``, and its join when not the default) and, once it failed,
why. The statuses of nodes the coordinator has not spawned are inferred as
:mod:`chongming.controller.pipeline_view` says.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from chongming.cli.app import JsonFlag, _checked_id, _emit, _fail, _options, _run, app

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.controller.pipeline_view import PipelineView

__all__ = ["graph_text", "pipelines", "runs_text"]

#: The join every node has unless it says otherwise (``pipeline/join.py``).
_DEFAULT_JOIN = "all_succeeded"


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _status(view: PipelineView) -> str:
    return f"{view.status} (parked until a node ends)" if view.parked else view.status


def _counts(view: PipelineView) -> str:
    return ", ".join(f"{count} {status}" for status, count in view.counts().items()) or "-"


def runs_text(views: list[PipelineView]) -> str:
    from chongming.render.table import render_rows

    if not views:
        return "no stored pipelines (controller.enqueue_pipeline stores one)"
    rows = [
        (view.run_id, view.name, _status(view), _counts(view), _when(view.created_at))
        for view in views
    ]
    return render_rows(("RUN", "NAME", "STATUS", "NODES", "CREATED"), rows)


def graph_text(view: PipelineView) -> str:
    from chongming.render.table import render_rows
    from chongming.render.text import escape_text

    head = (
        f"pipeline {view.run_id} ({view.name}, {view.aggregation}): {_status(view)}"
        f" - {len(view.nodes)} nodes: {_counts(view)}"
    )
    rows = []
    for node in view.nodes:
        waits = ", ".join(node.depends_on)
        if waits and node.join != _DEFAULT_JOIN:
            waits = f"{waits} ({node.join})"
        rows.append((node.node_id, node.task, node.status, f"<- {waits}" if waits else "-"))
    lines = [escape_text(head), "", render_rows(("NODE", "TASK", "STATUS", "UPSTREAM"), rows)]
    failures = [(node.node_id, node.failure) for node in view.nodes if node.failure]
    if failures:
        lines.append("")
        lines.extend(escape_text(f"{node_id}: {failure}") for node_id, failure in failures)
    return "\n".join(lines)


@app.command()
def pipelines(
    ctx: typer.Context,
    run_id: Annotated[
        str | None,
        typer.Argument(help="A stored pipeline's run id: show it as a graph.", show_default=False),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="How many runs to list.")] = 20,
    json_flag: JsonFlag = False,
) -> None:
    """Stored pipelines (newest first), or one of them: its nodes with their statuses."""
    from chongming.cli.session import CliError

    options = _options(ctx, json_flag)
    wanted = None if run_id is None else _checked_id(options, run_id)
    if limit < 1:
        _fail(CliError(f"--limit must be at least 1, got {limit}"), options.debug)

    async def action(controller: Controller) -> None:
        from chongming.controller.pipeline_view import (
            pipeline_view,
            pipeline_views,
            view_to_json,
        )

        store = controller.store
        assert store is not None
        if wanted is not None:
            view = await pipeline_view(store, wanted)
            _emit(options, {"pipeline": view_to_json(view)}, lambda: graph_text(view))
            return
        views = await pipeline_views(store, limit=limit)
        data = {"pipelines": [view_to_json(view) for view in views]}
        _emit(options, data, lambda: runs_text(views))

    _run(options, action)
