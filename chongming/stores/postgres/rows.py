"""Records <-> PostgreSQL parameters and rows.

Everything is checked before it reaches the server (NUL, lone surrogates,
NaN, size), so the store raises the same :class:`PayloadError` as every
other store instead of a driver error halfway through a batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming.state.payload import check_json_size, check_label, check_task_id, dump_json
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores import checks
from chongming.stores.base import Command, CommandKind
from chongming.stores.codec import snapshot_from_columns
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS
from chongming.stores.postgres.writer import WriteArgs

__all__ = [
    "COLUMN_INDEX",
    "check_command",
    "command_from_row",
    "progress_param",
    "snapshot_from_row",
    "snapshot_params",
    "transition_from_row",
    "transition_rows",
    "write_columns",
]

# The API layer caps payloads for every store alike; the store only refuses
# what it cannot hold, plus an optional cap of its own (``max_payload_bytes``).


def _json(value: Any, what: str, limit: int | None) -> str:
    if not value and (value is None or value == () or value == [] or value == {}):
        return "{}" if isinstance(value, dict) else ("null" if value is None else "[]")
    text = dump_json(value, what)
    if limit is not None:
        check_json_size(text, what, limit)
    return text


def _text(value: str | None, what: str) -> str | None:
    checks.check_text(value, what)
    return value


def progress_param(progress: Progress | None, limit: int | None) -> str | None:
    if progress is None:
        return None
    data = {
        "done": progress.done,
        "total": progress.total,
        "unit": progress.unit,
        "message": progress.message,
    }
    return _json(data, "progress", limit)


def snapshot_params(snapshot: TaskSnapshot, limit: int | None) -> list[Any]:
    """Values in :data:`~chongming.stores.postgres.sql.SNAPSHOT_COLUMNS` order."""
    failure = snapshot.failure
    failure_text = None
    if failure is not None:
        failure_text = _json(
            {
                "kind": failure.kind.value,
                "message": failure.message,
                "exception_type": failure.exception_type,
                "retryable": failure.retryable,
            },
            "failure",
            limit,
        )
    tags = sorted(snapshot.tags)
    for tag in tags:
        _text(tag, "tag")
    return [
        check_task_id(snapshot.task_id),
        _text(snapshot.name, "name"),
        check_label(snapshot.label),
        TaskStatus(snapshot.status).value,
        snapshot.status_version,
        snapshot.attempt,
        snapshot.max_attempts,
        snapshot.bucket,
        _text(snapshot.bucket_key, "bucket_key"),
        tags,
        snapshot.priority,
        _text(snapshot.owner, "owner"),
        snapshot.created_at,
        snapshot.updated_at,
        snapshot.queued_at,
        snapshot.started_at,
        snapshot.finished_at,
        snapshot.last_heartbeat_at,
        progress_param(snapshot.progress, limit),
        failure_text,
        _json(snapshot.result, "result", limit),
        _json(list(snapshot.args) if snapshot.args else [], "args", limit),
        _json(dict(snapshot.kwargs) if snapshot.kwargs else {}, "kwargs", limit),
    ]


def transition_rows(transitions: Sequence[Transition]) -> list[tuple[Any, ...]]:
    """One tuple per transition, in the column order of the transitions table."""
    return [
        (
            check_task_id(record.task_id),
            record.version,
            TaskStatus(record.from_status).value,
            TaskStatus(record.to_status).value,
            record.at,
            _text(record.trigger, "trigger"),
            _text(record.actor, "actor"),
            _text(record.reason, "reason"),
            record.attempt,
        )
        for record in transitions
    ]


def check_command(command: Command) -> None:
    checks.check_command(command)
    CommandKind(command.kind)


def snapshot_from_row(row: Mapping[str, Any]) -> TaskSnapshot:
    return snapshot_from_columns(row)


def transition_from_row(row: Mapping[str, Any]) -> Transition:
    return Transition(
        task_id=row["task_id"],
        version=row["version"],
        from_status=TaskStatus(row["from_status"]),
        to_status=TaskStatus(row["to_status"]),
        at=row["at"],
        trigger=row["trigger"],
        actor=row["actor"],
        reason=row["reason"],
        attempt=row["attempt"],
    )


def command_from_row(row: Mapping[str, Any]) -> Command:
    expires: datetime | None = row["lease_expires_at"]
    return Command(
        command_id=row["command_id"],
        task_id=row["task_id"],
        kind=CommandKind(row["kind"]),
        created_at=row["created_at"],
        actor=row["actor"],
        reason=row["reason"],
        target_owner=row["target_owner"],
        claimed_by=row["claimed_by"],
        lease_expires_at=expires,
    )


COLUMN_INDEX = {name: index for index, (name, _) in enumerate(SNAPSHOT_COLUMNS)}
_TAGS = COLUMN_INDEX["tags"]


def write_columns(batch: list[WriteArgs]) -> list[list[Any]]:
    """Column arrays for the set-based write statement (see sql.py)."""
    width = len(SNAPSHOT_COLUMNS)
    arrays: list[list[Any]] = [[] for _ in range(2 + width + 1 + 9)]
    modes, expects = arrays[0], arrays[1]
    ords = arrays[2 + width]
    for ordinal, args in enumerate(batch, start=1):
        modes.append(args.mode)
        expects.append(args.expect)
        for index, value in enumerate(args.params):
            if index == _TAGS and value is not None:
                value = json.dumps(value, ensure_ascii=False)
            arrays[2 + index].append(value)
        for record in args.transitions:
            ords.append(ordinal)
            for index, value in enumerate(record):
                arrays[3 + width + index].append(value)
    return arrays
