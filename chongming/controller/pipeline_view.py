"""A stored pipeline as a graph with each node's status: what ``chongming pipelines`` shows.

A stored pipeline is its coordinator task (the graph is its argument) and
the node tasks it spawned (``<run_id>:<node_id>``, its children). A node the
coordinator has not spawned has no row; what it is then follows from the
graph, the same pure join rules the coordinator uses, and whether the
coordinator still runs:

- the coordinator is live: ``blocked`` (it waits for its upstream);
- the coordinator ended: ``skipped`` if its join can no longer hold (as the
  coordinator records it), else ``cancelled`` (the pipeline ended first:
  fail-fast, or a stop).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming.controller.stored_pipelines import PIPELINE_TASK
from chongming.errors import ConfigurationError, TaskNotFound
from chongming.pipeline.join import JoinMode, JoinVerdict, judge_join
from chongming.plane.outages import through_outages
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore

__all__ = [
    "NodeView",
    "PipelineView",
    "node_statuses",
    "pipeline_view",
    "pipeline_views",
    "view_to_json",
]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodeView:
    """One node: its place in the graph and what became of it."""

    node_id: str
    task: str
    depends_on: tuple[str, ...]
    join: str
    status: str
    task_id: str | None  # None: never spawned
    attempt: int = 0
    failure: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelineView:
    """One stored pipeline run: its coordinator's row and its nodes, in graph order."""

    run_id: str
    name: str
    aggregation: str
    status: str  # the coordinator's
    parked: bool  # queued after an attempt began: it waits, off any slot, for a node to end
    created_at: datetime
    finished_at: datetime | None
    nodes: tuple[NodeView, ...]

    def counts(self) -> dict[str, int]:
        """How many nodes are in each status, in the order they first appear."""
        found: dict[str, int] = {}
        for node in self.nodes:
            found[node.status] = found.get(node.status, 0) + 1
        return found


def node_statuses(
    nodes: Sequence[Mapping[str, Any]], rows: Mapping[str, str], *, coordinator_live: bool
) -> dict[str, str]:
    """Each node's status: its row's, else inferred (module docstring). Pure."""
    statuses: dict[str, str] = {}
    for node in nodes:  # graph order: every upstream is decided before its dependents
        node_id = str(node["id"])
        if node_id in rows:
            statuses[node_id] = rows[node_id]
            continue
        if coordinator_live:
            statuses[node_id] = "blocked"
            continue
        upstream = [statuses.get(str(u), "cancelled") for u in node["depends_on"]]
        verdict = judge_join(
            JoinMode(node["join"]),
            total=len(upstream),
            succeeded=sum(status == "succeeded" for status in upstream),
            settled=sum(_settled(status) for status in upstream),
        )
        statuses[node_id] = "skipped" if verdict is JoinVerdict.UNSATISFIABLE else "cancelled"
    return statuses


def _settled(status: str) -> bool:
    try:
        return TaskStatus(status).is_terminal
    except ValueError:
        return False


async def pipeline_view(store: TaskStore, run_id: str) -> PipelineView:
    """The run ``run_id``; :class:`TaskNotFound` or a ConfigurationError naming what it is."""
    coordinator = await through_outages(functools.partial(store.get, run_id))
    if coordinator is None:
        raise TaskNotFound(run_id)
    if coordinator.name != PIPELINE_TASK:
        raise ConfigurationError(
            f"task {run_id!r} is a {coordinator.name!r} task, not a stored pipeline "
            "(`chongming pipelines` lists them)"
        )
    return await _view(store, coordinator)


async def pipeline_views(store: TaskStore, *, limit: int = 20) -> list[PipelineView]:
    """The newest ``limit`` stored pipeline runs, newest first."""
    query = TaskQuery(name=PIPELINE_TASK)
    found = await through_outages(functools.partial(store.query, query))
    newest = sorted(found, key=lambda row: (row.created_at, row.task_id), reverse=True)[:limit]
    return [await _view(store, coordinator) for coordinator in newest]


async def _view(store: TaskStore, coordinator: TaskSnapshot) -> PipelineView:
    graph = coordinator.args[0] if coordinator.args else {}
    graph = graph if isinstance(graph, dict) else {}
    nodes: list[Mapping[str, Any]] = [n for n in graph.get("nodes", []) if isinstance(n, dict)]
    prefix = f"{coordinator.task_id}:"
    rows: dict[str, TaskSnapshot] = {}
    for child_id in await through_outages(
        functools.partial(store.children_of, coordinator.task_id)
    ):
        if child_id.startswith(prefix):
            row = await through_outages(functools.partial(store.get, child_id))
            if row is not None:
                rows[child_id.removeprefix(prefix)] = row
    statuses = node_statuses(
        nodes,
        {node_id: row.status.value for node_id, row in rows.items()},
        coordinator_live=not coordinator.status.is_terminal,
    )
    views = []
    for node in nodes:
        node_id = str(node["id"])
        row = rows.get(node_id)
        views.append(
            NodeView(
                node_id=node_id,
                task=str(node.get("task", "")),
                depends_on=tuple(str(u) for u in node.get("depends_on", [])),
                join=str(node.get("join", "")),
                status=statuses[node_id],
                task_id=None if row is None else row.task_id,
                attempt=0 if row is None else row.attempt,
                failure=None if row is None or row.failure is None else row.failure.message,
            )
        )
    return PipelineView(
        run_id=coordinator.task_id,
        name=str(graph.get("name", "")),
        aggregation=str(graph.get("aggregation", "")),
        status=coordinator.status.value,
        parked=coordinator.status is TaskStatus.QUEUED and coordinator.attempt > 0,
        created_at=coordinator.created_at,
        finished_at=coordinator.finished_at,
        nodes=tuple(views),
    )


def view_to_json(view: PipelineView) -> dict[str, Any]:
    """The run as JSON: ``chongming pipelines --json`` and the dashboard's API."""
    return {
        "run_id": view.run_id,
        "name": view.name,
        "aggregation": view.aggregation,
        "status": view.status,
        "parked": view.parked,
        "created_at": view.created_at.isoformat(),
        "finished_at": None if view.finished_at is None else view.finished_at.isoformat(),
        "counts": view.counts(),
        "nodes": [
            {
                "id": node.node_id,
                "task": node.task,
                "depends_on": list(node.depends_on),
                "join": node.join,
                "status": node.status,
                "task_id": node.task_id,
                "attempt": node.attempt,
                "failure": node.failure,
            }
            for node in view.nodes
        ],
    }
