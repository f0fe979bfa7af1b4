"""SQL statements of the PostgreSQL store, built once per schema.

Every write of a snapshot (create, compare-and-set save, touch, append) is
one statement (:attr:`Statements.write`) so that a single call is a single
round trip, and a batch of them is one set-based statement in one
implicit transaction (group commit). Conflicts never raise inside the
statement (``ON CONFLICT DO NOTHING``, a CAS ``WHERE``), so one caller's
conflict cannot abort the batch of others; the returned row tells each
caller what happened.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

from chongming.state.query import TaskQuery
from chongming.state.status import TERMINAL_STATUSES, TaskStatus
from chongming.stores.columns import TASK_COLUMNS, Role
from chongming.stores.postgres.rows import write_columns
from chongming.stores.postgres.schema import quote_schema
from chongming.stores.postgres.writer import WriteArgs

__all__ = ["SNAPSHOT_COLUMNS", "Statements"]

#: (name, PostgreSQL type) of every task column a snapshot fills, from the shared table.
SNAPSHOT_COLUMNS: tuple[tuple[str, str], ...] = tuple((c.name, c.postgres) for c in TASK_COLUMNS)
_MUTABLE = frozenset(c.name for c in TASK_COLUMNS if c.role is Role.MUTABLE)
_TRANSITION_COLUMNS = (
    ("task_id", "text"),
    ("version", "int"),
    ("from_status", "text"),
    ("to_status", "text"),
    ("at", "timestamptz"),
    ("trigger", "text"),
    ("actor", "text"),
    ("reason", "text"),
    ("attempt", "int"),
)
_SELECT_TASK = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)
#: Said beside each update's join to its input: the rows are fetched by key (an
#: index scan of the array), never by a scan of the whole table hashed against it.
_BY_KEY = "the rows by key, not a scan of the table"
_NODE_COLUMNS = (
    "owner, incarnation, host, pid, version, num_buckets, owned_buckets,"
    " started_at, renewed_at, lease_expires_at, serves"
)
_ACTIVE_TEXT = ", ".join(
    f"'{status.value}'" for status in sorted(TaskStatus) if status not in TERMINAL_STATUSES
)
_COMMAND_COLUMNS = (
    "command_id, task_id, kind, created_at, actor, reason, target_owner,"
    " claimed_by, lease_expires_at"
)


def _input_kind(name: str, kind: str) -> str:
    # Tags are a text[] per task; arrays of arrays must be rectangular, so each
    # task's tags travel as one JSON array and are unpacked on the server.
    return "jsonb" if name == "tags" else kind


def _value(name: str, prefix: str) -> str:
    if name == "tags":
        return f"ARRAY(SELECT jsonb_array_elements_text({prefix}tags))"
    return f"{prefix}{name}"


def _write_statement(s: str) -> str:
    """One statement for a whole batch of writes (each task at most once per batch).

    Input: one array per column, element ``k`` belonging to write ``k``
    (``mode`` is create / save / patch / touch / append; a patch is a save
    that writes only the mutable columns); transitions as arrays too,
    linked to their write by its ordinal. Output: one row per write, in order:
    whether it applied, and the version the task had before the statement.
    """
    columns = [("mode", "text"), ("expect", "int")] + [
        (name, _input_kind(name, kind)) for name, kind in SNAPSHOT_COLUMNS
    ]
    arrays = ", ".join(f"${i + 1}::{kind}[]" for i, (_, kind) in enumerate(columns))
    aliases = ", ".join(name for name, _ in columns)
    first = len(columns) + 1
    transition_arrays = ", ".join(
        [f"${first}::bigint[]"]
        + [f"${first + 1 + i}::{kind}[]" for i, (_, kind) in enumerate(_TRANSITION_COLUMNS)]
    )
    transition_aliases = ", ".join(name for name, _ in _TRANSITION_COLUMNS)
    names = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)
    values = ", ".join(_value(name, "") for name, _ in SNAPSHOT_COLUMNS)
    assignments = ", ".join(
        f"{name} = {_value(name, 'i.')}" for name, _ in SNAPSHOT_COLUMNS if name != "task_id"
    )
    patched = ", ".join(f"{name} = i.{name}" for name, _ in SNAPSHOT_COLUMNS if name in _MUTABLE)
    selected = ", ".join(f"tr.{name}" for name, _ in _TRANSITION_COLUMNS)
    ids = f"${1 + [name for name, _ in columns].index('task_id')}::text[]"
    return f"""
WITH input AS (
    SELECT * FROM unnest({arrays}) WITH ORDINALITY AS i({aliases}, ord)
), created AS (
    INSERT INTO {s}.tasks ({names})
    SELECT {values} FROM input WHERE mode = 'create'
    ON CONFLICT (task_id) DO NOTHING
    RETURNING task_id
), saved AS (
    UPDATE {s}.tasks AS t SET {assignments}
    FROM input AS i
    WHERE i.mode = 'save' AND t.task_id = i.task_id AND t.status_version = i.expect
        AND t.task_id = ANY({ids})  -- {_BY_KEY}
    RETURNING t.task_id
), patched AS (
    UPDATE {s}.tasks AS t SET {patched}
    FROM input AS i
    WHERE i.mode = 'patch' AND t.task_id = i.task_id AND t.status_version = i.expect
        AND t.task_id = ANY({ids})
    RETURNING t.task_id
), touched AS (
    UPDATE {s}.tasks AS t SET
        progress = COALESCE(i.progress, t.progress),
        last_heartbeat_at = COALESCE(i.last_heartbeat_at, t.last_heartbeat_at)
    FROM input AS i
    WHERE i.mode = 'touch' AND t.task_id = i.task_id
        AND (i.owner IS NULL OR t.owner = i.owner) AND t.task_id = ANY({ids})
    RETURNING t.task_id
), applied AS (
    SELECT task_id FROM created
    UNION ALL SELECT task_id FROM saved
    UNION ALL SELECT task_id FROM patched
    UNION ALL SELECT task_id FROM touched
), appended AS (
    INSERT INTO {s}.transitions ({transition_aliases})
    SELECT {selected}
    FROM unnest({transition_arrays}) AS tr(ord, {transition_aliases})
    JOIN input AS i ON i.ord = tr.ord
    WHERE i.mode = 'append' OR i.task_id IN (SELECT task_id FROM applied)
    ON CONFLICT (task_id, version) DO NOTHING
    RETURNING 1
)
SELECT i.ord,
       COALESCE(i.task_id IN (SELECT task_id FROM applied), false) AS applied,
       t.status_version AS current
FROM input AS i LEFT JOIN {s}.tasks AS t ON t.task_id = i.task_id
ORDER BY i.ord
"""


def _patch_statement(s: str) -> str:
    """The write statement for a batch of patches only: the common case, half the input.

    A patch carries the mutable columns and the transitions; the task id of a
    transition comes from its write (by ordinal). Same output as the general
    statement: one row per write, in order (``current`` is read only for a
    write that did not apply: nobody needs it otherwise).
    """
    columns = [("task_id", "text"), ("expect", "int")] + [
        (name, kind) for name, kind in SNAPSHOT_COLUMNS if name in _MUTABLE
    ]
    arrays = ", ".join(f"${i + 1}::{kind}[]" for i, (_, kind) in enumerate(columns))
    aliases = ", ".join(name for name, _ in columns)
    steps = _TRANSITION_COLUMNS[1:]  # without task_id
    first = len(columns) + 1
    typed = [f"${first + 1 + i}::{kind}[]" for i, (_, kind) in enumerate(steps)]
    step_arrays = ", ".join([f"${first}::bigint[]", *typed])
    step_aliases = ", ".join(name for name, _ in steps)
    patched = ", ".join(f"{name} = i.{name}" for name, _ in columns[2:])
    return f"""
WITH input AS (
    SELECT * FROM unnest({arrays}) WITH ORDINALITY AS i({aliases}, ord)
), patched AS (
    UPDATE {s}.tasks AS t SET {patched}
    FROM input AS i
    WHERE t.task_id = i.task_id AND t.status_version = i.expect
        AND t.task_id = ANY($1::text[])  -- {_BY_KEY}
    RETURNING t.task_id
), appended AS (
    INSERT INTO {s}.transitions (task_id, {step_aliases})
    SELECT i.task_id, {", ".join(f"tr.{name}" for name, _ in steps)}
    FROM unnest({step_arrays}) AS tr(ord, {step_aliases})
    JOIN input AS i ON i.ord = tr.ord
    WHERE i.task_id IN (SELECT task_id FROM patched)
    ON CONFLICT (task_id, version) DO NOTHING
    RETURNING 1
)
SELECT i.ord, p.task_id IS NOT NULL AS applied,
       CASE WHEN p.task_id IS NULL THEN
           (SELECT t.status_version FROM {s}.tasks AS t WHERE t.task_id = i.task_id)
       END AS current
FROM input AS i LEFT JOIN patched AS p ON p.task_id = i.task_id
ORDER BY i.ord
"""


#: Where the mutable columns sit in a write's ``params`` (which follow TASK_COLUMNS).
_PATCHED_AT = tuple(i for i, (name, _) in enumerate(SNAPSHOT_COLUMNS) if name in _MUTABLE)
_PICK_PATCHED = operator.itemgetter(*_PATCHED_AT)  # more than one: it answers tuples
assert len(_PATCHED_AT) > 1


def patch_columns(batch: Sequence[WriteArgs]) -> list[list[Any]]:
    """Column arrays for the patch statement (every write a patch).

    Transposed by ``zip`` (in C) rather than appended value by value: a batch of
    60 patches is some 1,500 values, built once per batch on the writer's loop.
    """
    pick = _PICK_PATCHED
    rows = [pick(args.params) for args in batch]
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else []
    if len(columns) != len(_PATCHED_AT):
        columns = [[] for _ in _PATCHED_AT]
    ords: list[int] = []
    records: list[tuple[Any, ...]] = []
    for ordinal, args in enumerate(batch, start=1):
        transitions = args.transitions
        if transitions:
            ords.extend([ordinal] * len(transitions))
            records.extend(transitions)
    width = len(_TRANSITION_COLUMNS)
    steps = [list(column) for column in zip(*records, strict=True)] if records else []
    if len(steps) != width:
        steps = [[] for _ in range(width)]
    return [
        [args.key for args in batch],
        [args.expect for args in batch],
        *columns,
        ords,
        *steps[1:],  # without task_id: the statement takes it from the write
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class Statements:
    """Every statement the store sends, for one schema."""

    schema: str
    quoted: str
    write: str
    patch: str
    get: str
    version: str
    history: str
    history_versions: str
    insert_command: str
    get_command: str
    claim: str
    claimed_with_token: str
    complete: str
    release: str
    records_all: str
    records_of_task: str
    register_node: str
    get_node: str
    renew_node: str
    release_node: str
    nodes: str
    counts_all: str
    counts_active: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        s = quote_schema(schema)
        records = (
            f"SELECT {_COMMAND_COLUMNS}, completed_at, outcome, clock_timestamp() AS now"
            f" FROM {s}.commands"
        )
        records_order = ' ORDER BY created_at DESC, command_id COLLATE "C" DESC'
        counts = f"SELECT status, bucket, owner, count(*) AS count FROM {s}.tasks"
        counts_group = " GROUP BY status, bucket, owner"
        return cls(
            schema=schema,
            quoted=s,
            write=_write_statement(s),
            patch=_patch_statement(s),
            get=f"SELECT {_SELECT_TASK} FROM {s}.tasks WHERE task_id = $1",
            version=f"SELECT status_version FROM {s}.tasks WHERE task_id = $1",
            history=(
                "SELECT task_id, version, from_status, to_status, at, trigger, actor, reason,"
                f" attempt FROM {s}.transitions WHERE task_id = $1 ORDER BY version"
            ),
            history_versions=(
                "SELECT task_id, version, from_status, to_status, at, trigger, actor, reason,"
                f" attempt FROM {s}.transitions WHERE task_id = $1 AND version = ANY($2::int[])"
            ),
            insert_command=(
                f"WITH inserted AS (INSERT INTO {s}.commands"
                " (command_id, task_id, kind, created_at, actor, reason, target_owner)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (command_id) DO NOTHING"
                " RETURNING 1)"
                " SELECT (SELECT count(*) FROM inserted) AS inserted,"
                " (SELECT count(*) FROM (SELECT pg_notify($8, $9) FROM inserted) AS n) AS notified"
            ),
            get_command=(
                f"SELECT {_COMMAND_COLUMNS}, claim_token, completed_at, completed_by, outcome"
                f" FROM {s}.commands WHERE command_id = $1"
            ),
            claim=(
                f"WITH picked AS (SELECT command_id FROM {s}.commands"
                " WHERE completed_at IS NULL AND (target_owner IS NULL OR target_owner = $1)"
                " AND (claimed_by IS NULL OR lease_expires_at <= clock_timestamp())"
                ' ORDER BY created_at, command_id COLLATE "C" LIMIT $3 FOR UPDATE SKIP LOCKED)'
                f" UPDATE {s}.commands AS c SET claimed_by = $1, claim_token = $4,"
                " lease_expires_at = clock_timestamp() + make_interval(secs => $2::float8)"
                " FROM picked WHERE c.command_id = picked.command_id"
                f" RETURNING {', '.join('c.' + c.strip() for c in _COMMAND_COLUMNS.split(','))}"
            ),
            claimed_with_token=(
                f"SELECT {_COMMAND_COLUMNS} FROM {s}.commands"
                " WHERE claim_token = $1 AND claimed_by = $2 AND completed_at IS NULL"
            ),
            complete=(
                f"UPDATE {s}.commands SET completed_at = clock_timestamp(), completed_by = $2,"
                " outcome = $3, lease_expires_at = NULL"
                " WHERE command_id = $1 AND claimed_by = $2 AND completed_at IS NULL"
            ),
            release=(
                f"UPDATE {s}.commands SET claimed_by = NULL, claim_token = NULL,"
                " lease_expires_at = NULL"
                " WHERE command_id = $1 AND claimed_by = $2 AND completed_at IS NULL"
            ),
            records_all=records + records_order + " LIMIT $1",
            records_of_task=records + " WHERE task_id = $1" + records_order + " LIMIT $2",
            # One statement: take the row when it is absent, expired or ours, else leave it
            # (no row returned: the caller reads who holds it). Two racing registrations
            # serialise on the row: the second sees the first's live lease.
            register_node=(
                f"INSERT INTO {s}.nodes AS n ({_NODE_COLUMNS})"
                " SELECT $1, $2, $3, $4, $5, $6, $7::int[], now.t, now.t,"
                " now.t + make_interval(secs => $8::float8), $9::text[]"
                " FROM (SELECT clock_timestamp() AS t) AS now"
                " ON CONFLICT (owner) DO UPDATE SET incarnation = EXCLUDED.incarnation,"
                " host = EXCLUDED.host, pid = EXCLUDED.pid, version = EXCLUDED.version,"
                " num_buckets = EXCLUDED.num_buckets, owned_buckets = EXCLUDED.owned_buckets,"
                " serves = EXCLUDED.serves,"
                " started_at = CASE WHEN n.incarnation = EXCLUDED.incarnation"
                " THEN n.started_at ELSE EXCLUDED.started_at END,"
                " renewed_at = EXCLUDED.renewed_at, lease_expires_at = EXCLUDED.lease_expires_at"
                " WHERE n.incarnation = EXCLUDED.incarnation"
                " OR n.lease_expires_at <= EXCLUDED.renewed_at"
                f" RETURNING {_NODE_COLUMNS}, true AS live"
            ),
            get_node=(
                f"SELECT {_NODE_COLUMNS}, lease_expires_at > clock_timestamp() AS live"
                f" FROM {s}.nodes WHERE owner = $1"
            ),
            renew_node=(
                f"UPDATE {s}.nodes SET renewed_at = now.t,"
                " lease_expires_at = now.t + make_interval(secs => $3::float8)"
                " FROM (SELECT clock_timestamp() AS t) AS now"
                " WHERE owner = $1 AND incarnation = $2"
            ),
            release_node=(
                f"UPDATE {s}.nodes"
                " SET lease_expires_at = LEAST(lease_expires_at, clock_timestamp())"
                " WHERE owner = $1 AND incarnation = $2"
            ),
            nodes=(
                f"SELECT {_NODE_COLUMNS}, lease_expires_at > clock_timestamp() AS live"
                f' FROM {s}.nodes ORDER BY owner COLLATE "C"'
            ),
            counts_all=counts + counts_group,
            counts_active=counts + f" WHERE status IN ({_ACTIVE_TEXT})" + counts_group,
        )

    def write_for(self, batch: Sequence[WriteArgs]) -> list[Any]:
        """The statement and its arguments for one round of writes (see the two statements)."""
        if all(args.mode == "patch" for args in batch):
            return [self.patch, *patch_columns(batch)]
        return [self.write, *write_columns(list(batch))]

    def query(self, query: TaskQuery) -> tuple[str, list[object]]:
        """A SELECT with only the filters ``query`` uses (so indexes apply)."""
        where: list[str] = []
        args: list[object] = []

        def add(condition: str, value: object) -> None:
            args.append(value)
            where.append(condition.format(f"${len(args)}"))

        if query.statuses is not None:
            add("status = ANY({}::text[])", sorted(status.value for status in query.statuses))
        # The tag and bucket indexes hold only rows with tags / a bucket (migration
        # 0010): each filter says so, so the index applies to every plan.
        if query.tag is not None:
            add("tags <> '{{}}' AND tags @> ARRAY[{}::text]", query.tag)
        if query.bucket is not None:
            add("bucket IS NOT NULL AND bucket = {}::int", query.bucket)
        if query.buckets is not None:
            add("bucket IS NOT NULL AND bucket = ANY({}::int[])", sorted(query.buckets))
        if query.name is not None:
            add("name = {}::text", query.name)
        if query.owner is not None:
            add("owner = {}::text", query.owner)
        sql = f"SELECT {_SELECT_TASK} FROM {self.quoted}.tasks"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += ' ORDER BY created_at, task_id COLLATE "C"'
        if query.limit is not None:
            args.append(query.limit)
            sql += f" LIMIT ${len(args)}"
        return sql, args
