"""Records <-> SQLite rows (pure functions, no I/O).

Timestamps become integer microseconds since the epoch (UTC): exact to the
microsecond, ordered by instant whatever offset the caller used. Structured
fields become compact JSON text (``allow_nan=False`` so the same row is valid
for PostgreSQL too).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import Command, CommandKind
from chongming.stores.codec import decode_failure, decode_progress, encode_failure, encode_progress

__all__ = [
    "COMMAND_COLUMNS",
    "TASK_COLUMNS",
    "TRANSITION_COLUMNS",
    "command_from_row",
    "command_row",
    "dump",
    "from_micros",
    "snapshot_from_row",
    "snapshot_row",
    "to_micros",
    "transition_from_row",
    "transition_row",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_loads = json.loads


def _refuse(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _make_dump() -> Callable[[Any], str]:
    """A reusable C encoder: ``JSONEncoder.encode`` builds a new one per call (3x slower).

    No cycle detection (``markers=None``): payloads were checked by the API
    (:func:`chongming.state.payload.dump_json`) before they reach a store.
    """
    if c_make_encoder is None:  # pragma: no cover - CPython always ships _json
        return _ENCODER.encode
    encoder = c_make_encoder(None, _refuse, encode_basestring, None, ":", ",", False, False, False)

    def dump(value: Any) -> str:
        if isinstance(value, str):
            return encode_basestring(value)
        return "".join(encoder(value, 0))

    return dump


#: ``json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))``, faster.
dump = _make_dump()
_TAGS: dict[frozenset[str], str] = {}


def _tags(tags: frozenset[str]) -> str:
    text = _TAGS.get(tags)
    if text is None:
        text = dump(sorted(tags))
        if len(_TAGS) < 4096:  # tag sets repeat; bound the cache all the same
            _TAGS[tags] = text
    return text


TASK_COLUMNS = (
    "task_id",
    "name",
    "label",
    "status",
    "status_version",
    "attempt",
    "max_attempts",
    "bucket",
    "bucket_key",
    "tags",
    "priority",
    "owner",
    "created_at",
    "updated_at",
    "queued_at",
    "started_at",
    "finished_at",
    "last_heartbeat_at",
    "progress",
    "failure",
    "result",
    "args",
    "kwargs",
)
TRANSITION_COLUMNS = (
    "task_id",
    "version",
    "from_status",
    "to_status",
    "at",
    "trigger",
    "actor",
    "reason",
    "attempt",
)
COMMAND_COLUMNS = (
    "command_id",
    "task_id",
    "kind",
    "created_at",
    "actor",
    "reason",
    "target_owner",
    "claimed_by",
    "lease_expires_at",
)


def to_micros(value: datetime) -> int:
    """Aware datetime -> microseconds since the epoch (exact integer arithmetic)."""
    return (value - _EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _when(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def snapshot_row(s: TaskSnapshot) -> tuple[Any, ...]:
    """Values in :data:`TASK_COLUMNS` order (the hot path of every save: keep it lean).

    Statuses are bound as the ``StrEnum`` members themselves: sqlite3 stores a
    ``str`` subclass as its text, and ``.value`` is a slow descriptor.
    """
    queued_at, started_at, finished_at, beat = (
        s.queued_at,
        s.started_at,
        s.finished_at,
        s.last_heartbeat_at,
    )
    return (
        s.task_id,
        s.name,
        s.label,
        s.status,
        s.status_version,
        s.attempt,
        s.max_attempts,
        s.bucket,
        s.bucket_key,
        _tags(s.tags) if s.tags else "[]",
        s.priority,
        s.owner,
        (s.created_at - _EPOCH) // _MICROSECOND,
        (s.updated_at - _EPOCH) // _MICROSECOND,
        None if queued_at is None else (queued_at - _EPOCH) // _MICROSECOND,
        None if started_at is None else (started_at - _EPOCH) // _MICROSECOND,
        None if finished_at is None else (finished_at - _EPOCH) // _MICROSECOND,
        None if beat is None else (beat - _EPOCH) // _MICROSECOND,
        None if s.progress is None else encode_progress(s.progress),
        None if s.failure is None else encode_failure(s.failure),
        "null" if s.result is None else dump(s.result),
        dump(list(s.args)) if s.args else "[]",
        dump(dict(s.kwargs)) if s.kwargs else "{}",
    )


def snapshot_from_row(row: Sequence[Any]) -> TaskSnapshot:
    """Inverse of :func:`snapshot_row` (extra trailing columns are ignored)."""
    tags = row[9]
    args = row[21]
    kwargs = row[22]
    return TaskSnapshot(
        task_id=row[0],
        name=row[1],
        label=row[2],
        status=TaskStatus(row[3]),
        status_version=row[4],
        attempt=row[5],
        max_attempts=row[6],
        bucket=row[7],
        bucket_key=row[8],
        tags=frozenset(_loads(tags)) if tags != "[]" else frozenset(),
        priority=row[10],
        owner=row[11],
        created_at=_EPOCH + timedelta(microseconds=row[12]),
        updated_at=_EPOCH + timedelta(microseconds=row[13]),
        queued_at=_when(row[14]),
        started_at=_when(row[15]),
        finished_at=_when(row[16]),
        last_heartbeat_at=_when(row[17]),
        progress=decode_progress(row[18]),
        failure=decode_failure(row[19]),
        result=_loads(row[20]),
        args=tuple(_loads(args)) if args != "[]" else (),
        kwargs=_loads(kwargs) if kwargs != "{}" else {},
    )


def transition_row(t: Transition) -> tuple[Any, ...]:
    return (
        t.task_id,
        t.version,
        t.from_status,
        t.to_status,
        (t.at - _EPOCH) // _MICROSECOND,
        t.trigger,
        t.actor,
        t.reason,
        t.attempt,
    )


def transition_from_row(row: Sequence[Any]) -> Transition:
    return Transition(
        task_id=row[0],
        version=row[1],
        from_status=TaskStatus(row[2]),
        to_status=TaskStatus(row[3]),
        at=from_micros(row[4]),
        trigger=row[5],
        actor=row[6],
        reason=row[7],
        attempt=row[8],
    )


def command_row(c: Command) -> tuple[Any, ...]:
    """A new, unclaimed command in :data:`COMMAND_COLUMNS` order."""
    return (
        c.command_id,
        c.task_id,
        c.kind.value,
        to_micros(c.created_at),
        c.actor,
        c.reason,
        c.target_owner,
        None,
        None,
    )


def command_from_row(row: Sequence[Any]) -> Command:
    return Command(
        command_id=row[0],
        task_id=row[1],
        kind=CommandKind(row[2]),
        created_at=from_micros(row[3]),
        actor=row[4],
        reason=row[5],
        target_owner=row[6],
        claimed_by=row[7],
        lease_expires_at=_when(row[8]),
    )
