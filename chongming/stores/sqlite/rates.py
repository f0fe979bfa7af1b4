"""Rate limits on SQLite (blocking: the writer's thread, inside its ``BEGIN IMMEDIATE``).

``BEGIN IMMEDIATE`` serialises every writer on the file, so a grant is a
read-then-write of the key's row that no other process can interleave: two
workers asking for the last start of a period never both get it. The time is
the store clock (``now``, raised to its high-water mark: a clock step back on
one process cannot hand out a period twice).
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from chongming.errors import UnknownRateLimit
from chongming.stores.ports.rates import RateLimitStore
from chongming.stores.rates import (
    RateGrant,
    RateLimit,
    check_grant_request,
    check_rate_limit,
    check_rate_name,
    grant_starts,
)
from chongming.stores.sqlite.internals import SqliteInternals

__all__ = ["ACTIONS", "RateLimitsOnSqlite", "run_action"]

#: The writer actions this module answers (all read the store clock).
ACTIONS = frozenset({"rate_declare", "rate_set", "rate_take", "rate_list"})

_PUT = "INSERT INTO rate_limits (name, rate, per_micros, burst, updated_at) VALUES (?, ?, ?, ?, ?)"
_SET = (
    f"{_PUT} ON CONFLICT (name) DO UPDATE SET rate = excluded.rate,"
    " per_micros = excluded.per_micros, burst = excluded.burst, updated_at = excluded.updated_at"
)
_GET = "SELECT rate, per_micros, burst FROM rate_limits WHERE name = ?"
_TAT = "SELECT tat FROM rate_grants WHERE name = ? AND key = ?"
_PUT_TAT = (
    "INSERT INTO rate_grants (name, key, tat) VALUES (?, ?, ?)"
    " ON CONFLICT (name, key) DO UPDATE SET tat = excluded.tat"
)


def run_action(conn: sqlite3.Connection, action: str, params: tuple[Any, ...], now: int) -> Any:
    if action == "rate_declare":
        name, limit = params
        conn.execute(_PUT.replace("INSERT", "INSERT OR IGNORE"), (name, *_columns(limit), now))
        return _limit(conn, name)
    if action == "rate_set":
        name, limit = params
        conn.execute(_SET, (name, *_columns(limit), now))
        return None
    if action == "rate_take":
        return _take(conn, *params, now=now)
    if action == "rate_list":
        rows = conn.execute("SELECT name, rate, per_micros, burst FROM rate_limits ORDER BY name")
        return {name: _record(rate, per, burst) for name, rate, per, burst in rows}
    raise TypeError(f"unknown rate action {action!r}")


def _columns(limit: RateLimit) -> tuple[int, int, int]:
    return limit.rate, limit.per // timedelta(microseconds=1), limit.burst


def _record(rate: int, per_micros: int, burst: int) -> RateLimit:
    return RateLimit(rate=int(rate), per=timedelta(microseconds=int(per_micros)), burst=int(burst))


def _limit(conn: sqlite3.Connection, name: str) -> RateLimit:
    row = conn.execute(_GET, (name,)).fetchone()
    if row is None:
        raise UnknownRateLimit(name)
    return _record(*row)


def _take(conn: sqlite3.Connection, name: str, key: str, want: int, *, now: int) -> RateGrant:
    limit = _limit(conn, name)
    row = conn.execute(_TAT, (name, key)).fetchone()
    granted, tat, retry_after = grant_starts(
        tat=None if row is None else float(row[0]), now=now / 1e6, limit=limit, want=want
    )
    if granted:
        conn.execute(_PUT_TAT, (name, key, tat))
    return RateGrant(granted=granted, retry_after=retry_after)


class RateLimitsOnSqlite(SqliteInternals, RateLimitStore):
    """The store port's rate-limit methods: each one op in the writer's transaction."""

    async def declare_rate_limit(self, name: str, limit: RateLimit) -> RateLimit:
        stored: RateLimit = await self._node_op(
            "rate_declare", check_rate_name(name), check_rate_limit(limit)
        )
        return stored

    async def set_rate_limit(self, name: str, limit: RateLimit) -> None:
        await self._node_op("rate_set", check_rate_name(name), check_rate_limit(limit))

    async def take_rate_grants(self, name: str, *, key: str = "", want: int = 1) -> RateGrant:
        check_grant_request(name, key, want)
        grant: RateGrant = await self._node_op("rate_take", name, key, want)
        return grant

    async def rate_limits(self) -> dict[str, RateLimit]:
        found: dict[str, RateLimit] = await self._node_op("rate_list")
        return found
