"""The one description of a task row, shared by every SQL backend.

Each :class:`Column` names a :class:`~chongming.state.records.TaskSnapshot`
field, its SQL type in each dialect, its :class:`Kind` (which says how it is
encoded and decoded, see :mod:`chongming.stores.rowcodec`) and its
:class:`Role`: the key, an *identity* field fixed when the task is created,
or a *mutable* field that a state change rewrites. A save whose identity
fields are those already stored writes only the mutable columns: about half
the row, which is most of what a save costs.

Schemas (the numbered ``stores/sql/*.sql`` migrations) must list the same
columns; ``tests/stores/test_columns.py`` checks each dialect's table against
this one.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
from collections.abc import Callable
from typing import Any

from chongming.state.records import TaskSnapshot

__all__ = [
    "IDENTITY_COLUMNS",
    "LINK_COLUMNS",
    "MUTABLE_COLUMNS",
    "TASK_COLUMNS",
    "Column",
    "Kind",
    "Role",
    "identity_of",
]


class Kind(enum.Enum):
    """How a value is encoded for and decoded from a column."""

    TEXT = "text"  # checked text (NUL, lone surrogates)
    LABEL = "label"  # text with the label rules
    KEY = "key"  # the task id rules
    INTEGER = "integer"
    STATUS = "status"  # a TaskStatus, stored as its value
    TIME = "time"  # an aware datetime (SQLite: integer microseconds since the epoch, UTC)
    TAGS = "tags"  # a frozenset of text (SQLite: a JSON array; PostgreSQL: text[])
    PROGRESS = "progress"  # state.serialize's JSON of a Progress
    FAILURE = "failure"  # state.serialize's JSON of a Failure
    PAYLOAD = "payload"  # user JSON, size-capped (the result)
    ARGS = "args"  # user JSON array, read back as a tuple
    KWARGS = "kwargs"  # user JSON object, read back as a dict


class Role(enum.Enum):
    KEY = "key"
    IDENTITY = "identity"  # written by create; a save rewrites it only when it changed
    MUTABLE = "mutable"  # written by every save


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    name: str
    kind: Kind
    role: Role
    nullable: bool
    sqlite: str
    postgres: str


def _column(
    name: str, kind: Kind, role: Role, sqlite: str, postgres: str, *, nullable: bool = False
) -> Column:
    return Column(
        name=name, kind=kind, role=role, nullable=nullable, sqlite=sqlite, postgres=postgres
    )


_K, _I, _M = Role.KEY, Role.IDENTITY, Role.MUTABLE

#: Every column of the ``tasks`` table that a snapshot fills, in table order.
#: (The lease columns are not here: only the lease methods write them.)
TASK_COLUMNS: tuple[Column, ...] = (
    _column("task_id", Kind.KEY, _K, "TEXT", "text"),
    _column("name", Kind.TEXT, _I, "TEXT", "text"),
    _column("label", Kind.LABEL, _I, "TEXT", "text"),
    _column("status", Kind.STATUS, _M, "TEXT", "text"),
    _column("status_version", Kind.INTEGER, _M, "INTEGER", "integer"),
    _column("attempt", Kind.INTEGER, _M, "INTEGER", "integer"),
    _column("max_attempts", Kind.INTEGER, _I, "INTEGER", "integer"),
    _column("bucket", Kind.INTEGER, _I, "INTEGER", "integer", nullable=True),
    _column("bucket_key", Kind.TEXT, _I, "TEXT", "text", nullable=True),
    _column("tags", Kind.TAGS, _I, "TEXT", "text[]"),
    _column("priority", Kind.INTEGER, _I, "INTEGER", "integer"),
    _column("owner", Kind.TEXT, _M, "TEXT", "text", nullable=True),
    _column("created_at", Kind.TIME, _I, "INTEGER", "timestamptz"),
    _column("updated_at", Kind.TIME, _M, "INTEGER", "timestamptz"),
    _column("queued_at", Kind.TIME, _M, "INTEGER", "timestamptz", nullable=True),
    _column("started_at", Kind.TIME, _M, "INTEGER", "timestamptz", nullable=True),
    _column("finished_at", Kind.TIME, _M, "INTEGER", "timestamptz", nullable=True),
    _column("last_heartbeat_at", Kind.TIME, _M, "INTEGER", "timestamptz", nullable=True),
    _column("progress", Kind.PROGRESS, _M, "TEXT", "jsonb", nullable=True),
    _column("failure", Kind.FAILURE, _M, "TEXT", "jsonb", nullable=True),
    _column("result", Kind.PAYLOAD, _M, "TEXT", "jsonb"),
    _column("args", Kind.ARGS, _I, "TEXT", "jsonb"),
    _column("kwargs", Kind.KWARGS, _I, "TEXT", "jsonb"),
    # migration 0003: work for any node
    _column("version", Kind.INTEGER, _I, "INTEGER", "integer", nullable=True),
    _column("not_before", Kind.TIME, _I, "INTEGER", "timestamptz", nullable=True),
    _column("idempotency_key", Kind.TEXT, _I, "TEXT", "text", nullable=True),
)

#: Columns of the ``tasks`` table after :data:`TASK_COLUMNS` that no snapshot fills,
#: as ``(name, SQLite type, PostgreSQL type)``: only their own calls write them
#: (``parent_id``: ``link_child``, SQLite migration 0013, PostgreSQL 0014).
LINK_COLUMNS: tuple[tuple[str, str, str], ...] = (("parent_id", "TEXT", "text"),)

IDENTITY_COLUMNS: tuple[Column, ...] = tuple(c for c in TASK_COLUMNS if c.role is Role.IDENTITY)
MUTABLE_COLUMNS: tuple[Column, ...] = tuple(c for c in TASK_COLUMNS if c.role is Role.MUTABLE)

_fields = {f.name for f in dataclasses.fields(TaskSnapshot)}
if {c.name for c in TASK_COLUMNS} != _fields:  # pragma: no cover - caught at import by any test
    raise RuntimeError(f"TASK_COLUMNS and TaskSnapshot disagree: {_fields}")

#: The identity fields of a snapshot as a tuple (compared to what a store last wrote).
identity_of: Callable[[TaskSnapshot], tuple[Any, ...]] = operator.attrgetter(
    *(c.name for c in IDENTITY_COLUMNS)
)
