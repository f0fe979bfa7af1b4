"""Records <-> SQLite rows (pure functions, no I/O).

Task rows follow the shared column table (:mod:`chongming.stores.columns`),
encoded by :mod:`chongming.stores.rowcodec`'s SQLite dialect: timestamps
become integer microseconds since the epoch (UTC) — exact to the
microsecond, ordered by instant whatever offset the caller used — and
structured fields compact JSON text (valid for PostgreSQL too).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming.errors import PayloadError
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.checks import check_snapshot_text, check_time
from chongming.stores.codec import dump
from chongming.stores.columns import MUTABLE_COLUMNS, TASK_COLUMNS
from chongming.stores.nodes import Command, CommandKind
from chongming.stores.rowcodec import (
    SQLITE,
    SQLITE_TRUSTED,
    Encoder,
    compile_decoder,
    compile_encoder,
)

__all__ = [
    "COMMAND_COLUMNS",
    "TASK_NAMES",
    "TRANSITION_COLUMNS",
    "command_from_row",
    "command_row",
    "dump",
    "encode",
    "from_micros",
    "full_update_row",
    "insert_row",
    "patch_row",
    "snapshot_from_row",
    "to_micros",
    "transition_from_row",
    "transition_row",
    "trusted_full_update_row",
    "trusted_insert_row",
    "trusted_patch_row",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

#: Column names of a task row, in table order.
TASK_NAMES: tuple[str, ...] = tuple(column.name for column in TASK_COLUMNS)
#: Every column, for an INSERT.
insert_row: Encoder = compile_encoder(SQLITE, TASK_COLUMNS)
#: Every column but the key, then ``task_id, expect``: a full compare-and-set UPDATE.
full_update_row: Encoder = compile_encoder(SQLITE, TASK_COLUMNS[1:], tail=("s.task_id", "expect"))
#: The mutable columns, then ``task_id, expect``: the UPDATE of a save that keeps the identity.
patch_row: Encoder = compile_encoder(SQLITE, MUTABLE_COLUMNS, tail=("s.task_id", "expect"))
#: The same three for a trusted write (records the runtime made and checked): not checked again.
trusted_insert_row: Encoder = compile_encoder(SQLITE_TRUSTED, TASK_COLUMNS)
trusted_full_update_row: Encoder = compile_encoder(
    SQLITE_TRUSTED, TASK_COLUMNS[1:], tail=("s.task_id", "expect")
)
trusted_patch_row: Encoder = compile_encoder(
    SQLITE_TRUSTED, MUTABLE_COLUMNS, tail=("s.task_id", "expect")
)
#: A task row (extra trailing columns are ignored) -> the snapshot.
snapshot_from_row = compile_decoder(SQLITE, TASK_COLUMNS)


def encode(
    encoder: Encoder, snapshot: TaskSnapshot, limit: int | None, expect: int | None = None
) -> tuple[Any, ...]:
    """Run ``encoder``; a value of the wrong type gets the shared check's PayloadError."""
    try:
        return encoder(snapshot, limit, expect)
    except (TypeError, AttributeError, ValueError) as error:
        if isinstance(error, PayloadError):
            raise
        check_snapshot_text(snapshot)  # names the bad field when it is one it knows
        raise PayloadError("snapshot", f"cannot be stored ({error})") from None


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


def to_micros(value: datetime, what: str = "datetime") -> int:
    """Aware datetime -> microseconds since the epoch (exact integer arithmetic)."""
    return (check_time(value, what) - _EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _when(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def transition_row(t: Transition) -> tuple[Any, ...]:
    """A checked transition (see ``checks.check_transitions``) as a row."""
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
