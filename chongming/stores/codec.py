"""Encoding of records into column values shared by the SQL backends.

Structured fields (progress, failure, result, arguments, tags) are stored as
JSON text; statuses and kinds as their string values; timestamps as aware
UTC datetimes (each dialect converts those to its own column type).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from chongming.state.records import Failure, Progress, TaskSnapshot
from chongming.state.serialize import (
    failure_from_json,
    failure_to_json,
    progress_from_json,
    progress_to_json,
)

__all__ = [
    "decode_failure",
    "decode_progress",
    "encode_failure",
    "encode_progress",
    "snapshot_from_columns",
]


def encode_progress(progress: Progress | None) -> str | None:
    data = progress_to_json(progress)
    return None if data is None else json.dumps(data, ensure_ascii=False, allow_nan=False)


def decode_progress(text: str | Mapping[str, Any] | None) -> Progress | None:
    return progress_from_json(json.loads(text) if isinstance(text, str) else text)


def encode_failure(failure: Failure | None) -> str | None:
    data = failure_to_json(failure)
    return None if data is None else json.dumps(data, ensure_ascii=False)


def decode_failure(text: str | Mapping[str, Any] | None) -> Failure | None:
    return failure_from_json(json.loads(text) if isinstance(text, str) else text)


def snapshot_from_columns(row: Mapping[str, Any]) -> TaskSnapshot:
    """Inverse of :func:`snapshot_columns`; datetimes may arrive as ISO text."""
    from chongming.state.status import TaskStatus

    def when(key: str) -> datetime | None:
        value = row[key]
        if value is None or isinstance(value, datetime):
            return value
        return datetime.fromisoformat(value)

    def loads(key: str) -> Any:
        value = row[key]
        return json.loads(value) if isinstance(value, str) else value

    created_at = when("created_at")
    updated_at = when("updated_at")
    assert created_at is not None
    assert updated_at is not None
    return TaskSnapshot(
        task_id=row["task_id"],
        name=row["name"],
        label=row["label"],
        status=TaskStatus(row["status"]),
        status_version=row["status_version"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        bucket=row["bucket"],
        bucket_key=row["bucket_key"],
        tags=frozenset(loads("tags") or ()),
        priority=row["priority"],
        owner=row["owner"],
        created_at=created_at,
        updated_at=updated_at,
        queued_at=when("queued_at"),
        started_at=when("started_at"),
        finished_at=when("finished_at"),
        last_heartbeat_at=when("last_heartbeat_at"),
        progress=decode_progress(row["progress"]),
        failure=decode_failure(row["failure"]),
        result=loads("result"),
        args=tuple(loads("args") or ()),
        kwargs=dict(loads("kwargs") or {}),
    )
