"""What each CLI command prints: a table for people, a stable JSON object for scripts.

Pure functions from records to text or JSON-ready dicts; every table goes
through :func:`~chongming.render.render_rows`, which escapes control
characters, ANSI escapes and bidi overrides and keeps wide characters aligned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from chongming.control.buckets import BucketReport
from chongming.control.reconcile import ReconcileOutcome, ReconcileReport
from chongming.control.waiting import WaitingReason
from chongming.controller.statistics import count_tasks
from chongming.render import escape_text, render_history, render_rows, render_table
from chongming.scheduler.buckets import format_bucket_ranges
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.serialize import snapshot_to_json, transition_to_json
from chongming.state.status import TaskStatus
from chongming.stores.nodes import CommandRecord, NodeRecord, TaskCount
from chongming.task_api.spec import TaskSpec

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

_NONE = "-"


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="seconds")


def _cell(value: datetime | None) -> str:
    return _iso(value) or _NONE


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
    return f"{table}\n{_unserved_line(unserved)}"


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


def _unserved_line(unserved: Mapping[str, int]) -> str:
    waiting = ", ".join(f"{name} ({count})" for name, count in sorted(unserved.items()))
    return f"    no worker serves {escape_text(waiting)}: those tasks wait, queued"


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
        ("owner", snapshot.owner or _NONE),
        ("created", _cell(snapshot.created_at)),
        ("started", _cell(snapshot.started_at)),
        ("finished", _cell(snapshot.finished_at)),
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
    owners = [(owner or _NONE, str(count)) for owner, count in data["by_owner"].items()]
    return "\n".join(
        [
            render_rows(("STATUS", "TASKS"), rows),
            "",
            render_rows(("OWNER", "TASKS"), owners),
            "",
            f"    total {data['total']}, active {data['active']}",
        ]
    )


# -- buckets -------------------------------------------------------------------------------


def buckets_json(report: BucketReport, owned: frozenset[int] | None) -> dict[str, Any]:
    return {
        "num_buckets": report.num_buckets,
        "owned_buckets": None if owned is None else format_bucket_ranges(owned),
        "buckets": [
            {
                "bucket": row.bucket,
                "owners": list(row.owners),
                "ranged": list(row.ranged),
                "tasks": row.tasks,
                "active": row.active,
                "mine": owned is not None and row.bucket in owned,
                "owned_twice": row.owned_twice,
                "orphaned": row.orphaned,
            }
            for row in report.rows
        ],
        "owned_twice": [row.bucket for row in report.owned_twice],
        "orphaned": [row.bucket for row in report.orphaned],
        "unbucketed_active": report.unbucketed_active,
        "unserved": dict(report.unserved),
        "shared": list(report.shared),
        "mismatched": dict(report.mismatched),
    }


def buckets_text(report: BucketReport, owned: frozenset[int] | None) -> str:
    rows = []
    for row in report.rows:
        flags = [
            flag
            for flag, on in (("OWNED TWICE", row.owned_twice), ("ORPHANED", row.orphaned))
            if on
        ]
        mine = owned is not None and row.bucket in owned
        rows.append(
            (
                f"{row.bucket}*" if mine else str(row.bucket),
                ",".join(row.owners) or _NONE,
                str(row.tasks),
                str(row.active),
                " ".join(flags) or _NONE,
            )
        )
    lines = [render_rows(("BUCKET", "OWNERS", "TASKS", "ACTIVE", "FLAGS"), rows)]
    if owned is not None:
        lines.append(f"    * owned here (--owned-buckets {format_bucket_ranges(owned)})")
    twice = [row.bucket for row in report.owned_twice]
    orphaned = [row.bucket for row in report.orphaned]
    lines.append(
        f"    owned twice: {format_bucket_ranges(twice) or 'none'}; "
        f"orphaned: {format_bucket_ranges(orphaned) or 'none'}; "
        f"unfinished tasks without a bucket: {report.unbucketed_active}"
    )
    if report.shared:
        lines.append(
            f"    shared pool (no --owned-buckets: every bucket, claims never overlap): "
            f"{escape_text(', '.join(report.shared))}"
        )
    if report.mismatched:
        found = ", ".join(f"{owner} ({n})" for owner, n in sorted(report.mismatched.items()))
        lines.append(
            f"    num_buckets differs from {report.num_buckets} on live nodes: "
            f"{escape_text(found)}; one key lands in different buckets on them"
        )
    if report.unserved:
        lines.append(_unserved_line(report.unserved))
    return "\n".join(lines)


# -- nodes -----------------------------------------------------------------------------------


def _ranges(owned: frozenset[int] | None) -> str | None:
    return None if owned is None else format_bucket_ranges(owned)


def nodes_json(nodes: Sequence[NodeRecord]) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "owner": node.info.owner,
                "live": node.live,
                "incarnation": node.info.incarnation,
                "host": node.info.host,
                "pid": node.info.pid,
                "version": node.info.version,
                "num_buckets": node.info.num_buckets,
                "owned_buckets": _ranges(node.info.owned_buckets),
                "started_at": _iso(node.started_at),
                "renewed_at": _iso(node.renewed_at),
                "lease_expires_at": _iso(node.lease_expires_at),
                "serves": sorted(node.info.serves),
            }
            for node in nodes
        ]
    }


def nodes_text(nodes: Sequence[NodeRecord]) -> str:
    rows = [
        (
            node.info.owner,
            "live" if node.live else "expired",
            _ranges(node.info.owned_buckets) or f"all ({node.info.num_buckets})",
            node.info.host,
            str(node.info.pid),
            node.info.version,
            _cell(node.started_at),
            _cell(node.renewed_at),
            _cell(node.lease_expires_at),
        )
        for node in nodes
    ]
    headers = (
        "OWNER",
        "STATE",
        "BUCKETS",
        "HOST",
        "PID",
        "VERSION",
        "STARTED",
        "RENEWED",
        "EXPIRES",
    )
    live = sum(1 for node in nodes if node.live)
    return f"{render_rows(headers, rows)}\n    live {live}, expired {len(nodes) - live}"


# -- reconcile -------------------------------------------------------------------------------


def reconcile_json(report: ReconcileReport) -> dict[str, Any]:
    return {
        "dry_run": report.dry_run,
        "at": _iso(report.at),
        "entries": [
            {
                "outcome": entry.outcome.value,
                "task_id": entry.task_id,
                "was": entry.was.value,
                "owner": entry.owner,
                "detail": entry.detail,
            }
            for entry in report.entries
        ],
    }


def reconcile_text(report: ReconcileReport) -> str:
    rows = [
        (entry.outcome.value, entry.task_id, entry.was.value, entry.detail)
        for entry in report.entries
    ]
    counts = ", ".join(f"{outcome.value} {len(report.of(outcome))}" for outcome in ReconcileOutcome)
    mode = "dry run: nothing written" if report.dry_run else "applied"
    return f"{render_rows(('OUTCOME', 'TASK_ID', 'WAS', 'DETAIL'), rows)}\n    {counts} ({mode})"


# -- commands --------------------------------------------------------------------------------


def commands_json(records: Sequence[CommandRecord]) -> dict[str, Any]:
    return {
        "commands": [
            {
                "command_id": record.command.command_id,
                "task_id": record.command.task_id,
                "kind": record.command.kind.value,
                "created_at": _iso(record.command.created_at),
                "actor": record.command.actor,
                "reason": record.command.reason,
                "target_owner": record.command.target_owner,
                "claimed_by": record.command.claimed_by,
                "state": record.state.value,
                "outcome": record.outcome,
                "completed_at": _iso(record.completed_at),
            }
            for record in records
        ]
    }


def commands_text(records: Sequence[CommandRecord]) -> str:
    rows = [
        (
            _cell(record.command.created_at),
            record.command.kind.value,
            record.command.task_id,
            record.command.target_owner or _NONE,
            record.state.value,
            record.outcome or _NONE,
            record.command.actor,
            record.command.reason or _NONE,
        )
        for record in records
    ]
    headers = ("AT", "KIND", "TASK_ID", "TARGET", "STATE", "OUTCOME", "ACTOR", "REASON")
    return render_rows(headers, rows)


# -- tasks (the registry of a task module) ------------------------------------------------


def tasks_json(module: str, specs: Sequence[TaskSpec]) -> dict[str, Any]:
    return {"module": module, "tasks": [_spec_json(spec) for spec in specs]}


def _spec_json(spec: TaskSpec) -> dict[str, Any]:
    retry = spec.retry
    timeout = spec.timeout
    return {
        "name": spec.name,
        "version": spec.version,
        "kind": "async" if spec.is_coroutine else "sync",
        "executor": _executor_name(spec),
        "tags": sorted(spec.tags),
        "priority": spec.priority,
        "retry": None
        if retry is None
        else {
            "max_attempts": retry.max_attempts,
            "backoff": type(retry.backoff).__name__,
            "retry_timeouts": retry.retry_timeouts,
        },
        "timeout": None
        if timeout is None
        else {"per_attempt": timeout.per_attempt, "idle": timeout.idle, "start": timeout.start},
    }


def tasks_text(specs: Sequence[TaskSpec]) -> str:
    headers = ("NAME", "KIND", "EXECUTOR", "TAGS", "PRIORITY", "RETRY", "TIMEOUT")
    rows = []
    for spec in specs:
        data = _spec_json(spec)
        retry = data["retry"]
        timeout = data["timeout"]
        rows.append(
            (
                spec.name if spec.version is None else f"{spec.name}@{spec.version}",
                data["kind"],
                data["executor"],
                ",".join(data["tags"]) or _NONE,
                str(spec.priority),
                _NONE if retry is None else f"{retry['max_attempts']} attempts",
                _NONE if timeout is None else _timeouts(timeout),
            )
        )
    return render_rows(headers, rows)


def _executor_name(spec: TaskSpec) -> str:
    choice = spec.executor
    if choice is None:
        return "thread" if not spec.is_coroutine else "loop"
    return choice if isinstance(choice, str) else type(choice).__name__


def _timeouts(timeout: dict[str, float | None]) -> str:
    parts = [f"{key} {value:g}s" for key, value in timeout.items() if value is not None]
    return ", ".join(parts) or _NONE
