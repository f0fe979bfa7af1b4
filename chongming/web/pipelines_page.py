"""A stored pipeline on the dashboard: ``/pipelines/<run_id>`` and ``/api/pipelines/<run_id>``.

The same view as ``chongming pipelines <run_id>``
(:mod:`chongming.controller.pipeline_view`): each node in graph order with its
status (a badge), what it waits for, and a link to its task once it has one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from chongming.controller.pipeline_view import PipelineView, pipeline_view, view_to_json
from chongming.errors import ConfigurationError
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.web.board import BadInput
from chongming.web.pages import Chrome, badge, e, layout, table, when

__all__ = ["pipeline_data", "pipeline_markup", "pipeline_page"]

_HEADERS = ["node", "task", "status", "upstream", "join", "attempt", "failure"]


async def _view(store: TaskStore | None, run_id: str) -> PipelineView:
    """The run, or :class:`BadInput` (a 400) for a task that is not a stored pipeline."""
    if store is None:
        raise BadInput("this dashboard has no store")
    try:
        return await pipeline_view(store, run_id)
    except ConfigurationError as error:
        raise BadInput(str(error)) from None


async def pipeline_data(store: TaskStore | None, run_id: str) -> dict[str, Any]:
    """``/api/pipelines/<run_id>``: ``{"pipeline": ...}`` as ``chongming pipelines --json``."""
    return {"pipeline": view_to_json(await _view(store, run_id))}


async def pipeline_markup(store: TaskStore | None, chrome: Chrome, run_id: str) -> str:
    return pipeline_page(chrome, await _view(store, run_id))


def _task_url(chrome: Chrome, task_id: str) -> str:
    return e(chrome.url("/tasks/" + quote(task_id, safe="")))


def _badge(status: str) -> str:
    try:
        return badge(TaskStatus(status))
    except ValueError:
        return e(status)


def pipeline_page(chrome: Chrome, view: PipelineView) -> str:
    rows = []
    for node in view.nodes:
        name = e(node.node_id)
        if node.task_id is not None:
            name = f'<a href="{_task_url(chrome, node.task_id)}">{name}</a>'
        rows.append(
            [
                name,
                e(node.task),
                _badge(node.status),
                e(", ".join(node.depends_on) or "-"),
                e(node.join),
                str(node.attempt) if node.task_id is not None else "-",
                e(node.failure or "-"),
            ]
        )
    counts = ", ".join(f"{n} {status}" for status, n in view.counts().items()) or "-"
    parked = " (parked until a node ends)" if view.parked else ""
    coordinator = f'<a href="{_task_url(chrome, view.run_id)}">{e(view.run_id)}</a>'
    body = (
        f"<h1>pipeline {e(view.run_id)}</h1>"
        f'<p data-pipeline-status="{e(view.status)}">{e(view.name)} ({e(view.aggregation)}): '
        f"{_badge(view.status)}{e(parked)} · coordinator task {coordinator} · created "
        f"{when(view.created_at)} · finished {when(view.finished_at)}</p>"
        f"<p>{len(view.nodes)} nodes: {e(counts)}</p>" + table(_HEADERS, rows)
    )
    return layout(chrome, "tasks", f"pipeline {view.run_id}", body)
