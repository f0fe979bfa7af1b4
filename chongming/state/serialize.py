"""Records as plain JSON-ready dicts, for HTTP APIs, ``--json`` output and logs.

One shape everywhere a snapshot leaves the process as JSON, so a dashboard,
the CLI and a user's own service agree on field names.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from chongming.state.records import Failure, FailureKind, Progress, TaskSnapshot, Transition

__all__ = [
    "failure_from_json",
    "failure_to_json",
    "progress_from_json",
    "progress_to_json",
    "snapshot_to_json",
    "transition_to_json",
]


def snapshot_to_json(snapshot: TaskSnapshot) -> dict[str, Any]:
    """Every field of the snapshot; timestamps as ISO 8601, enums as their values."""
    return {
        "task_id": snapshot.task_id,
        "name": snapshot.name,
        "label": snapshot.label,
        "status": snapshot.status.value,
        "status_version": snapshot.status_version,
        "attempt": snapshot.attempt,
        "max_attempts": snapshot.max_attempts,
        "bucket": snapshot.bucket,
        "bucket_key": snapshot.bucket_key,
        "tags": sorted(snapshot.tags),
        "priority": snapshot.priority,
        "owner": snapshot.owner,
        "created_at": _iso(snapshot.created_at),
        "updated_at": _iso(snapshot.updated_at),
        "queued_at": _iso(snapshot.queued_at),
        "started_at": _iso(snapshot.started_at),
        "finished_at": _iso(snapshot.finished_at),
        "last_heartbeat_at": _iso(snapshot.last_heartbeat_at),
        "progress": progress_to_json(snapshot.progress),
        "failure": failure_to_json(snapshot.failure),
        "result": snapshot.result,
        "args": list(snapshot.args),
        "kwargs": dict(snapshot.kwargs),
        "version": snapshot.version,
        "not_before": _iso(snapshot.not_before),
        "idempotency_key": snapshot.idempotency_key,
    }


def transition_to_json(transition: Transition) -> dict[str, Any]:
    """One history entry as the JSON the CLI (``history --json``) and the dashboard print."""
    return {
        "task_id": transition.task_id,
        "version": transition.version,
        "from": transition.from_status.value,
        "to": transition.to_status.value,
        "at": _iso(transition.at),
        "trigger": transition.trigger,
        "actor": transition.actor,
        "reason": transition.reason,
        "attempt": transition.attempt,
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def progress_to_json(progress: Progress | None) -> dict[str, Any] | None:
    if progress is None:
        return None
    return {
        "done": progress.done,
        "total": progress.total,
        "unit": progress.unit,
        "message": progress.message,
    }


def failure_to_json(failure: Failure | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {
        "kind": failure.kind.value,
        "message": failure.message,
        "exception_type": failure.exception_type,
        "retryable": failure.retryable,
    }


def progress_from_json(data: Mapping[str, Any] | None) -> Progress | None:
    if data is None:
        return None
    return Progress(
        done=data["done"],
        total=data.get("total"),
        unit=data.get("unit"),
        message=data.get("message"),
    )


def failure_from_json(data: Mapping[str, Any] | None) -> Failure | None:
    if data is None:
        return None
    return Failure(
        kind=FailureKind(data["kind"]),
        message=data["message"],
        exception_type=data.get("exception_type"),
        retryable=bool(data.get("retryable", False)),
    )
