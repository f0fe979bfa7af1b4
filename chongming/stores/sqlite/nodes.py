"""Node rows, command records and the store clock on SQLite (blocking: the writer's thread).

Every function here runs inside the writer's ``BEGIN IMMEDIATE`` transaction,
so a register is a read-then-write that no other process can interleave:
of two processes registering one owner at once, exactly one wins.

The store clock (:func:`advance_clock`): the wall clock of the process,
raised to the high-water mark kept in ``store_clock`` and written back in the
same transaction. Every lease decision on nodes (register, renew, release and
the ``nodes()`` judgement itself) goes through it, so once any process on the
file has judged a lease expired, no process can judge it alive again, even if
its wall clock steps back (it then sees time stand still until its wall
clock catches up).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from chongming.errors import NodeConflict
from chongming.stores.codec import dump
from chongming.stores.nodes import CommandRecord, CommandState, NodeInfo, NodeRecord
from chongming.stores.sqlite.rows import COMMAND_COLUMNS, command_from_row, from_micros

__all__ = [
    "NODE_COLUMNS",
    "advance_clock",
    "command_record_from_row",
    "list_nodes",
    "node_from_row",
    "register_node",
    "release_node",
    "renew_node",
]

NODE_COLUMNS = (
    "owner",
    "incarnation",
    "host",
    "pid",
    "version",
    "num_buckets",
    "owned_buckets",
    "started_at",
    "renewed_at",
    "lease_expires_at",
    "serves",
)
_SELECT_NODE = f"SELECT {', '.join(NODE_COLUMNS)} FROM nodes"
_UPSERT_NODE = (
    f"INSERT OR REPLACE INTO nodes ({', '.join(NODE_COLUMNS)})"
    f" VALUES ({', '.join('?' * len(NODE_COLUMNS))})"
)


def advance_clock(conn: sqlite3.Connection, wall_micros: int) -> int:
    """The store's now: ``max(wall, high-water)``, written back as the new high-water."""
    row = conn.execute("SELECT high_water FROM store_clock WHERE id = 1").fetchone()
    now = max(wall_micros, 0 if row is None else int(row[0]))
    conn.execute("INSERT OR REPLACE INTO store_clock (id, high_water) VALUES (1, ?)", (now,))
    return now


def node_from_row(row: Sequence[Any], now: int) -> NodeRecord:
    owned = row[6]
    return NodeRecord(
        info=NodeInfo(
            owner=row[0],
            incarnation=row[1],
            host=row[2],
            pid=row[3],
            version=row[4],
            num_buckets=row[5],
            owned_buckets=None if owned is None else frozenset(_loads_ints(owned)),
            serves=frozenset(json.loads(row[10])),
        ),
        started_at=from_micros(row[7]),
        renewed_at=from_micros(row[8]),
        lease_expires_at=from_micros(row[9]),
        live=row[9] > now,
    )


def _loads_ints(text: str) -> list[int]:
    import json

    return [int(value) for value in json.loads(text)]


def register_node(
    conn: sqlite3.Connection, info: NodeInfo, ttl_micros: int, now: int
) -> NodeRecord:
    current = conn.execute(f"{_SELECT_NODE} WHERE owner = ?", (info.owner,)).fetchone()
    started = now
    if current is not None:
        same = current[1] == info.incarnation
        if not same and current[9] > now:
            raise NodeConflict(info.owner, current[2], current[3])
        if same:
            started = current[7]
    owned = None if info.owned_buckets is None else dump(sorted(info.owned_buckets))
    row = (
        info.owner,
        info.incarnation,
        info.host,
        info.pid,
        info.version,
        info.num_buckets,
        owned,
        started,
        now,
        now + ttl_micros,
        dump(sorted(info.serves)),
    )
    conn.execute(_UPSERT_NODE, row)
    return node_from_row(row, now)


def renew_node(
    conn: sqlite3.Connection, owner: str, incarnation: str, ttl_micros: int, now: int
) -> bool:
    cursor = conn.execute(
        "UPDATE nodes SET renewed_at = ?, lease_expires_at = ? WHERE owner = ? AND incarnation = ?",
        (now, now + ttl_micros, owner, incarnation),
    )
    return cursor.rowcount == 1


def release_node(conn: sqlite3.Connection, owner: str, incarnation: str, now: int) -> None:
    conn.execute(
        "UPDATE nodes SET lease_expires_at = min(lease_expires_at, ?)"
        " WHERE owner = ? AND incarnation = ?",
        (now, owner, incarnation),
    )


def list_nodes(conn: sqlite3.Connection, now: int) -> list[NodeRecord]:
    rows = conn.execute(f"{_SELECT_NODE} ORDER BY owner").fetchall()
    return [node_from_row(row, now) for row in rows]


#: A command row for ``command_records``: the command, then completed_at and outcome.
RECORD_SELECT = f"SELECT {', '.join(COMMAND_COLUMNS)}, completed_at, outcome FROM commands"


def command_record_from_row(row: Sequence[Any], now: int) -> CommandRecord:
    command = command_from_row(row)
    completed = row[len(COMMAND_COLUMNS)]
    if completed is not None:
        return CommandRecord(
            command=command,
            state=CommandState.DONE,
            outcome=row[len(COMMAND_COLUMNS) + 1],
            completed_at=from_micros(completed),
        )
    expires = row[COMMAND_COLUMNS.index("lease_expires_at")]
    claimed = command.claimed_by is not None and expires is not None and expires > now
    return CommandRecord(
        command=command, state=CommandState.CLAIMED if claimed else CommandState.PENDING
    )
