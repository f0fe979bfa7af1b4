"""What the control plane's commands print: ``buckets``, ``nodes``, ``reconcile``, ``commands``.

Pure functions from the plane's records (bucket reports, node leases,
reconcile reports, command records) to a table for people or a stable JSON
object for scripts; every table goes through
:func:`~chongming.render.render_rows`. The views of tasks are
:mod:`chongming.cli.views`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chongming.cli.cells import NONE, cell, iso, unserved_line
from chongming.plane.buckets import BucketReport
from chongming.plane.reconcile import ReconcileOutcome, ReconcileReport
from chongming.render import escape_text, render_rows
from chongming.scheduler.buckets import format_bucket_ranges
from chongming.stores.nodes import CommandRecord, NodeRecord

__all__ = [
    "buckets_json",
    "buckets_text",
    "commands_json",
    "commands_text",
    "nodes_json",
    "nodes_text",
    "reconcile_json",
    "reconcile_text",
]


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
                ",".join(row.owners) or NONE,
                str(row.tasks),
                str(row.active),
                " ".join(flags) or NONE,
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
        lines.append(unserved_line(report.unserved))
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
                "started_at": iso(node.started_at),
                "renewed_at": iso(node.renewed_at),
                "lease_expires_at": iso(node.lease_expires_at),
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
            cell(node.started_at),
            cell(node.renewed_at),
            cell(node.lease_expires_at),
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
        "at": iso(report.at),
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
                "created_at": iso(record.command.created_at),
                "actor": record.command.actor,
                "reason": record.command.reason,
                "target_owner": record.command.target_owner,
                "claimed_by": record.command.claimed_by,
                "state": record.state.value,
                "outcome": record.outcome,
                "completed_at": iso(record.completed_at),
            }
            for record in records
        ]
    }


def commands_text(records: Sequence[CommandRecord]) -> str:
    rows = [
        (
            cell(record.command.created_at),
            record.command.kind.value,
            record.command.task_id,
            record.command.target_owner or NONE,
            record.state.value,
            record.outcome or NONE,
            record.command.actor,
            record.command.reason or NONE,
        )
        for record in records
    ]
    headers = ("AT", "KIND", "TASK_ID", "TARGET", "STATE", "OUTCOME", "ACTOR", "REASON")
    return render_rows(headers, rows)
