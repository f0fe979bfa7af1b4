"""What the task commands print: a table for people, a stable JSON object for scripts.

Pure functions from task records (snapshots, transitions, counts) to text or
JSON-ready dicts, for ``ps``, ``status``, ``history``, ``stats`` and the
control commands; every table goes through :func:`~chongming.render.render_rows`,
which escapes control characters, ANSI escapes and bidi overrides and keeps
wide characters aligned. The control plane's views are
:mod:`chongming.cli.plane_views`, a task module's :mod:`chongming.cli.registry_views`;
both are exported here too, as they were before they moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming.cli.cells import NONE, cell, unserved_line
from chongming.cli.plane_views import buckets_json as buckets_json
from chongming.cli.plane_views import buckets_text as buckets_text
from chongming.cli.plane_views import commands_json as commands_json
from chongming.cli.plane_views import commands_text as commands_text
from chongming.cli.plane_views import nodes_json as nodes_json
from chongming.cli.plane_views import nodes_text as nodes_text
from chongming.cli.plane_views import reconcile_json as reconcile_json
from chongming.cli.plane_views import reconcile_text as reconcile_text
from chongming.cli.registry_views import tasks_json as tasks_json
from chongming.cli.registry_views import tasks_text as tasks_text
from chongming.controller.statistics import count_tasks
from chongming.plane.waiting import WaitingReason
from chongming.render import escape_text, render_history, render_rows, render_table
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.serialize import snapshot_to_json, transition_to_json
from chongming.state.status import TaskStatus
from chongming.stores.nodes import TaskCount

__all__ = [
    "buckets_json",
    "buckets_text",
    "commands_json",
    "commands_text",
    "control_json",
    "history_json",
    "history_text",
    "matching_counts",
    "nodes_json",
    "nodes_text",
    "ps_json",
    "ps_text",
    "reconcile_json",
    "reconcile_text",
    "stats_json",
    "stats_text",
    "status_json",
    "status_text",
    "tasks_json",
    "tasks_text",
    "unserved",
]

# -- ps, status, history ------------------------------------------------------------


def ps_json(
    snapshots: Sequence[TaskSnapshot],
    unserved: Mapping[str, int] | None = None,
    *,
    matching: Mapping[TaskStatus, int] | None = None,
    waiting: Mapping[str, WaitingReason] | None = None,
) -> dict[str, Any]:
    """``matching``: tasks per status of every match (default: the rows shown)."""
    counted = _per_status(snapshots) if matching is None else matching
    why = waiting or {}
    return {
        "tasks": [_task_json(snapshot, why.get(snapshot.task_id)) for snapshot in snapshots],
        "unserved": dict(unserved or {}),
        "matching": sum(counted.values()),
    }


def ps_text(
    snapshots: Sequence[TaskSnapshot],
    now: datetime | None = None,
    *,
    unserved: Mapping[str, int] | None = None,
    matching: Mapping[TaskStatus, int] | None = None,
    waiting: Mapping[str, WaitingReason] | None = None,
) -> str:
    """The table; its summary counts ``matching`` (every match) when only some rows are shown.

    ``waiting``: why queued tasks wait, shown beside their status.
    """
    reasons = {task_id: reason.describe() for task_id, reason in (waiting or {}).items()}
    table = render_table(snapshots, now=now, matching=matching, waiting=reasons)
    if not unserved:
        return table
    return f"{table}\n{unserved_line(unserved)}"


def matching_counts(counts: Iterable[TaskCount], query: TaskQuery) -> dict[TaskStatus, int] | None:
    """Tasks per status that ``query`` matches (its limit aside), from the store's grouped counts.

    ``None`` when the query filters on what the counts do not hold (a tag, a name).
    """
    if query.tag is not None or query.name is not None:
        return None
    found: dict[TaskStatus, int] = {}
    for count in counts:
        if query.statuses is not None and count.status not in query.statuses:
            continue
        if query.bucket is not None and count.bucket != query.bucket:
            continue
        if query.buckets is not None and count.bucket not in query.buckets:
            continue
        if query.owner is not None and count.owner != query.owner:
            continue
        found[count.status] = found.get(count.status, 0) + count.count
    return found


def _per_status(snapshots: Iterable[TaskSnapshot]) -> dict[TaskStatus, int]:
    found: dict[TaskStatus, int] = {}
    for snapshot in snapshots:
        found[snapshot.status] = found.get(snapshot.status, 0) + 1
    return found


def unserved(waiting: Sequence[TaskSnapshot], served: frozenset[str]) -> dict[str, int]:
    """``name@N`` (or ``name``) -> how many queued, unowned tasks no live worker serves."""
    from chongming.stores.nodes import unserved_counts

    return unserved_counts(waiting, served)


def status_json(
    snapshot: TaskSnapshot,
    waiting: WaitingReason | None = None,
    family: tuple[str | None, list[str]] = (None, []),
) -> dict[str, Any]:
    data = _task_json(snapshot, waiting)
    data["parent_id"], data["children"] = family[0], list(family[1])
    return {"task": data}


def _task_json(snapshot: TaskSnapshot, waiting: WaitingReason | None) -> dict[str, Any]:
    """The snapshot's JSON and ``waiting``: why a queued task waits (``null``: it does not)."""
    data = snapshot_to_json(snapshot)
    data["waiting"] = None if waiting is None else waiting.to_json()
    return data


def status_text(
    snapshot: TaskSnapshot,
    now: datetime | None = None,
    waiting: WaitingReason | None = None,
    family: tuple[str | None, list[str]] = (None, []),
) -> str:
    why = {} if waiting is None else {snapshot.task_id: waiting.describe()}
    lines = [render_table([snapshot], now=now, summary=False, waiting=why)]
    details = [
        ("owner", snapshot.owner or NONE),
        ("created", cell(snapshot.created_at)),
        ("started", cell(snapshot.started_at)),
        ("finished", cell(snapshot.finished_at)),
    ]
    if waiting is not None:
        details.append(("waiting", waiting.describe()))
    if snapshot.failure is not None:
        details.append(("failure", f"{snapshot.failure.kind.value}: {snapshot.failure.message}"))
    parent, children = family
    if parent is not None:
        details.append(("parent", parent))
    if children:
        details.append(("children", ", ".join(children)))
    lines.append("")
    lines.extend(f"{name + ':':<10}{escape_text(value)}" for name, value in details)
    return "\n".join(lines)


def history_json(task_id: str, transitions: Sequence[Transition]) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "transitions": [transition_to_json(transition) for transition in transitions],
    }


def history_text(transitions: Sequence[Transition]) -> str:
    return render_history(transitions)


# -- stop, pause, resume --------------------------------------------------------------


def control_json(kind: str, snapshot: TaskSnapshot, issued: bool) -> dict[str, Any]:
    return {
        "task_id": snapshot.task_id,
        "command": kind,
        "issued": issued,
        "status": snapshot.status.value,
        "owner": snapshot.owner,
    }


# -- stats ------------------------------------------------------------------------------


def stats_json(counts: Iterable[TaskCount]) -> dict[str, Any]:
    totals = count_tasks(counts)
    return {
        "total": totals.total,
        "active": totals.active,
        "by_status": dict(totals.by_status),
        "by_owner": dict(totals.by_owner),
    }


def stats_text(data: dict[str, Any]) -> str:
    rows = [(status, str(count)) for status, count in data["by_status"].items()]
    owners = [(owner or NONE, str(count)) for owner, count in data["by_owner"].items()]
    return "\n".join(
        [
            render_rows(("STATUS", "TASKS"), rows),
            "",
            render_rows(("OWNER", "TASKS"), owners),
            "",
            f"    total {data['total']}, active {data['active']}",
        ]
    )
