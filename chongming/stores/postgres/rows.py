"""Records <-> PostgreSQL parameters and rows.

Task rows follow the shared column table (:mod:`chongming.stores.columns`),
encoded and checked by :mod:`chongming.stores.rowcodec`'s PostgreSQL dialect,
so the store raises the same :class:`PayloadError` as every other store
instead of a driver error halfway through a batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming.errors import PayloadError
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.stores import checks
from chongming.stores.base import Command, CommandKind
from chongming.stores.codec import STATUS_OF, encode_progress
from chongming.stores.columns import IDENTITY_COLUMNS, TASK_COLUMNS
from chongming.stores.postgres.writer import WriteArgs
from chongming.stores.rowcodec import POSTGRES, Encoder, compile_decoder, compile_encoder

__all__ = [
    "COLUMN_INDEX",
    "PLANNER",
    "check_command",
    "command_from_row",
    "encode",
    "full_params",
    "known_arrays",
    "patch_params",
    "progress_param",
    "snapshot_from_row",
    "transition_from_row",
    "transition_rows",
    "write_columns",
]

log = logging.getLogger("chongming.stores.postgres")

#: Every column, in table order (create and a save that changes the identity).
full_params: Encoder = compile_encoder(POSTGRES, TASK_COLUMNS)
#: The same width with the identity columns left ``None`` (a save that keeps the identity).
patch_params: Encoder = compile_encoder(POSTGRES, TASK_COLUMNS, blank=IDENTITY_COLUMNS)
#: A row whose first columns are the task columns, in order -> the snapshot.
snapshot_from_row = compile_decoder(POSTGRES, TASK_COLUMNS)
COLUMN_INDEX = {column.name: index for index, column in enumerate(TASK_COLUMNS)}


def encode(encoder: Encoder, snapshot: TaskSnapshot, limit: int | None) -> list[Any]:
    """Run ``encoder``; a value of the wrong type gets the shared check's PayloadError."""
    try:
        return list(encoder(snapshot, limit, None))
    except (TypeError, AttributeError, ValueError) as error:
        if isinstance(error, PayloadError):
            raise
        checks.check_snapshot_text(snapshot)  # names the bad field when it is one it knows
        raise PayloadError("snapshot", f"cannot be stored ({error})") from None


def progress_param(progress: Progress | None, limit: int | None) -> str | None:
    return encode_progress(progress, limit)


def transition_rows(
    transitions: Sequence[Transition], checked_id: str | None = None
) -> list[tuple[Any, ...]]:
    """One tuple per (checked) transition, in the column order of the transitions table."""
    checks.check_transitions(transitions, checked_id)
    return [
        (
            t.task_id,
            t.version,
            t.from_status.value,
            t.to_status.value,
            t.at,
            t.trigger,
            t.actor,
            t.reason,
            t.attempt,
        )
        for t in transitions
    ]


def check_command(command: Command) -> None:
    checks.check_command(command)
    CommandKind(command.kind)


def transition_from_row(row: Mapping[str, Any]) -> Transition:
    return Transition(
        task_id=row["task_id"],
        version=row["version"],
        from_status=STATUS_OF[row["from_status"]],
        to_status=STATUS_OF[row["to_status"]],
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


def write_columns(batch: list[WriteArgs]) -> list[list[Any]]:
    """Column arrays for the set-based write statement (see sql.py)."""
    width = len(TASK_COLUMNS)
    arrays: list[list[Any]] = [[] for _ in range(2 + width + 1 + 9)]
    modes, expects = arrays[0], arrays[1]
    columns = arrays[2 : 2 + width]
    ords = arrays[2 + width]
    transition_columns = arrays[3 + width :]
    for ordinal, args in enumerate(batch, start=1):
        modes.append(args.mode)
        expects.append(args.expect)
        for array, value in zip(columns, args.params, strict=True):
            array.append(value)
        for record in args.transitions:
            ords.append(ordinal)
            for array, value in zip(transition_columns, record, strict=True):
                array.append(value)
    return arrays


#: Session settings of the store's pooled connections. Its statements touch a
#: batch of rows by key in tables whose hot part is cached; with the default
#: random_page_cost (4: a spinning disk) the planner hashes a scan of the whole
#: tasks table against a batch of a few hundred keys until the table holds
#: ~50,000 rows (20,000 rows: 2.5 ms of scan against 0.25 ms of index probes).
PLANNER = {"random_page_cost": "1.1"}

#: The builtin array types the store's statements send or read: (oid, name, element
#: oid, element name). PostgreSQL fixes these OIDs; asyncpg knows the elements.
_ARRAYS = (
    (1000, "_bool", 16, "boolean"),
    (1007, "_int4", 23, "integer"),
    (1016, "_int8", 20, "bigint"),
    (1022, "_float8", 701, "double precision"),
    (1185, "_timestamptz", 1184, "timestamp with time zone"),
    (3807, "_jsonb", 3802, "jsonb"),
)
_ARRAY_INFO = tuple(
    {
        "oid": oid,
        "ns": "pg_catalog",
        "name": name,
        "kind": b"b",
        "basetype": None,
        "elemtype": element,
        "elemdelim": b",",
        "range_subtype": None,
        "attrtypoids": None,
        "attrnames": None,
        "depth": 0,
        "basetype_name": None,
        "elemtype_name": element_name,
        "range_subtype_name": None,
    }
    for oid, name, element, element_name in _ARRAYS
)


async def known_arrays(conn: Any) -> None:
    """A new pooled connection learns the builtin array types without asking the server.

    asyncpg looks up every array type a statement uses, once per connection,
    with a catalog query that costs the server 10-70 ms here: for a pool of
    ten connections that is several hundred milliseconds of server time per
    process. These types are fixed, so they are registered as asyncpg's own
    introspection would (an asyncpg without this internal hook introspects as
    before).
    """
    try:
        conn._protocol.get_settings().register_data_types(_ARRAY_INFO)
    except Exception as error:  # pragma: no cover - another asyncpg
        log.debug("asyncpg array types not preloaded (%s); it will look them up", error)
