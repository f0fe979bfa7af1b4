"""Cluster-wide limits on SQLite (blocking: the writer's thread, inside its ``BEGIN IMMEDIATE``).

``BEGIN IMMEDIATE`` serialises every writer on the file, so a lease is a
read-then-write no other process can interleave: of two nodes asking for
the last slot at once, exactly one gets it. Liveness is the node row's lease
judged by the store clock (``now``, already raised to its high-water mark).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from chongming.errors import UnknownClusterLimit
from chongming.stores.limits import (
    ClusterLimit,
    check_capacity,
    check_lease,
    check_limit_name,
    granted_slots,
)
from chongming.stores.ports.limits import ClusterLimitStore
from chongming.stores.sqlite.internals import SqliteInternals

__all__ = ["ACTIONS", "ClusterLimitsOnSqlite", "run_action"]

#: The writer actions this module answers (all read the store clock).
ACTIONS = frozenset({"limit_declare", "limit_set", "limit_lease", "limit_list"})

_LIVE = (
    "EXISTS (SELECT 1 FROM nodes n WHERE n.owner = s.owner"
    " AND n.incarnation = s.incarnation AND n.lease_expires_at > ?)"
)
_DROP_DEAD = f"DELETE FROM cluster_slots AS s WHERE s.name = ? AND NOT {_LIVE}"
_HELD_BY_OTHERS = "SELECT coalesce(sum(held), 0) FROM cluster_slots WHERE name = ? AND owner <> ?"
_IS_LIVE = "SELECT 1 FROM nodes WHERE owner = ? AND incarnation = ? AND lease_expires_at > ?"
_UPSERT_SLOTS = (
    "INSERT INTO cluster_slots (name, owner, incarnation, held) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (name, owner) DO UPDATE SET incarnation = excluded.incarnation,"
    " held = excluded.held"
)
_LIST_HELD = (
    f"SELECT s.name, s.owner, s.held FROM cluster_slots AS s WHERE {_LIVE} ORDER BY s.name, s.owner"
)


def run_action(conn: sqlite3.Connection, action: str, params: tuple[Any, ...], now: int) -> Any:
    if action == "limit_declare":
        name, capacity = params
        conn.execute(
            "INSERT OR IGNORE INTO cluster_limits (name, capacity, updated_at) VALUES (?, ?, ?)",
            (name, capacity, now),
        )
        return _capacity(conn, name)
    if action == "limit_set":
        name, capacity = params
        conn.execute(
            "INSERT INTO cluster_limits (name, capacity, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET capacity = excluded.capacity,"
            " updated_at = excluded.updated_at",
            (name, capacity, now),
        )
        return None
    if action == "limit_lease":
        return _lease(conn, *params, now=now)
    if action == "limit_list":
        return _list(conn, now)
    raise TypeError(f"unknown limit action {action!r}")


def _capacity(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT capacity FROM cluster_limits WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise UnknownClusterLimit(name)
    return int(row[0])


def _lease(
    conn: sqlite3.Connection,
    name: str,
    owner: str,
    incarnation: str,
    want: int,
    keep: int,
    *,
    now: int,
) -> int:
    capacity = _capacity(conn, name)
    conn.execute(_DROP_DEAD, (name, now))
    (others,) = conn.execute(_HELD_BY_OTHERS, (name, owner)).fetchone()
    live = conn.execute(_IS_LIVE, (owner, incarnation, now)).fetchone() is not None
    held = granted_slots(
        capacity=capacity, held_by_others=int(others), want=want, keep=keep, live=live
    )
    if held > 0:
        conn.execute(_UPSERT_SLOTS, (name, owner, incarnation, held))
    else:
        conn.execute("DELETE FROM cluster_slots WHERE name = ? AND owner = ?", (name, owner))
    return held


def _list(conn: sqlite3.Connection, now: int) -> list[ClusterLimit]:
    holders: dict[str, dict[str, int]] = {}
    for name, owner, held in conn.execute(_LIST_HELD, (now,)):
        holders.setdefault(name, {})[owner] = int(held)
    return [
        ClusterLimit(name=name, capacity=int(capacity), holders=holders.get(name, {}))
        for name, capacity in conn.execute(
            "SELECT name, capacity FROM cluster_limits ORDER BY name"
        )
    ]


class ClusterLimitsOnSqlite(SqliteInternals, ClusterLimitStore):
    """The store port's cluster-limit methods: each one op in the writer's transaction."""

    async def declare_cluster_limit(self, name: str, capacity: int) -> int:
        stored: int = await self._node_op(
            "limit_declare", check_limit_name(name), check_capacity(capacity)
        )
        return stored

    async def set_cluster_limit(self, name: str, capacity: int) -> None:
        await self._node_op("limit_set", check_limit_name(name), check_capacity(capacity))

    async def lease_cluster_slots(
        self, name: str, owner: str, incarnation: str, *, want: int, keep: int
    ) -> int:
        check_lease(name, owner, incarnation, want, keep)
        held: int = await self._node_op("limit_lease", name, owner, incarnation, want, keep)
        return held

    async def cluster_limits(self) -> list[ClusterLimit]:
        found: list[ClusterLimit] = await self._node_op("limit_list")
        return found
