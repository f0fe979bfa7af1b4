"""Rate limits on PostgreSQL: one statement per grant decision.

The statement locks the key's row (``FOR UPDATE``), computes the GCRA
decision of :func:`chongming.stores.rates.grant_starts` from the row's
theoretical arrival time and the server's ``clock_timestamp()``, and moves
the row, all at once: grants of one key are decided one at a time across
every node, keys never wait on each other, and a grant costs one round trip.
A key's row is made on its first grant (``ON CONFLICT DO NOTHING``, then the
decision runs again), so two first grants cannot both start from "idle".

After a connection error the outcome is unknown and the grant runs again: a
lost answer may cost grants (the limit is then under-used), never add any.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from chongming.errors import UnknownRateLimit
from chongming.stores.postgres.schema import quote_schema
from chongming.stores.rates import (
    RateGrant,
    RateLimit,
    check_grant_request,
    check_rate_limit,
    check_rate_name,
)

__all__ = ["Grants", "RateLimitMethods", "RateLimitsOnPostgres"]

Runner = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


def grant_sql(schema: str) -> str:
    """``$1`` name, ``$2`` key, ``$3`` want -> granted, retry_after, had_row (no row: unknown)."""
    return (
        f"WITH c AS (SELECT per_s / rate AS i, (burst - 1) * per_s / rate AS tol"
        f" FROM {schema}.rate_limits WHERE name = $1),"
        " n AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS t),"
        f" g AS (SELECT tat FROM {schema}.rate_grants WHERE name = $1 AND key = $2 FOR UPDATE),"
        " d AS (SELECT c.i, c.tol, n.t, EXISTS (SELECT 1 FROM g) AS had_row,"
        " greatest((SELECT tat FROM g), n.t) AS base FROM c, n),"
        " k AS (SELECT d.*, greatest(0, least($3::int,"
        " floor((d.t + d.tol - d.base) / d.i + 1e-9)::int + 1)) AS granted FROM d),"
        f" u AS (UPDATE {schema}.rate_grants AS r SET tat = k.base + k.granted * k.i FROM k"
        " WHERE r.name = $1 AND r.key = $2 AND k.granted > 0 AND k.had_row RETURNING 1)"
        " SELECT k.granted, greatest(0, k.base + k.granted * k.i - k.tol - k.t) AS retry_after,"
        " k.had_row FROM k"
    )


class Grants:
    """One grant decision on a connection the caller holds (its own, or a transaction's)."""

    def __init__(self, schema: str) -> None:
        self._grant = grant_sql(schema)
        self._seed = (
            f"INSERT INTO {schema}.rate_grants (name, key, tat) VALUES ($1, $2, 0)"
            " ON CONFLICT DO NOTHING"
        )

    async def take(self, conn: Any, name: str, key: str, want: int) -> RateGrant:
        """Up to ``want`` grants of ``name`` for ``key``; an unknown limit: ``UnknownRateLimit``."""
        row = await conn.fetchrow(self._grant, name, key, want)
        if row is not None and not row["had_row"]:
            await conn.execute(self._seed, name, key)
            row = await conn.fetchrow(self._grant, name, key, want)
        if row is None:
            raise UnknownRateLimit(name)
        return RateGrant(granted=row["granted"], retry_after=float(row["retry_after"]))


class RateLimitsOnPostgres:
    """The statements; the store supplies the connection runner."""

    def __init__(self, schema: str, *, read: Runner) -> None:
        self._run = read
        columns = "(name, rate, per_s, burst) VALUES ($1, $2, $3, $4)"
        self._declare = (
            f"WITH put AS (INSERT INTO {schema}.rate_limits {columns}"
            " ON CONFLICT (name) DO NOTHING RETURNING rate, per_s, burst)"
            " SELECT rate, per_s, burst FROM put UNION ALL"
            f" SELECT rate, per_s, burst FROM {schema}.rate_limits WHERE name = $1 LIMIT 1"
        )
        self._set = (
            f"INSERT INTO {schema}.rate_limits {columns} ON CONFLICT (name) DO UPDATE"
            " SET rate = EXCLUDED.rate, per_s = EXCLUDED.per_s, burst = EXCLUDED.burst,"
            " updated_at = clock_timestamp()"
        )
        self._grants = Grants(schema)
        self._list = f"SELECT name, rate, per_s, burst FROM {schema}.rate_limits ORDER BY name"

    async def declare(self, name: str, limit: RateLimit) -> RateLimit:
        args = (check_rate_name(name), *_columns(check_rate_limit(limit)))
        row = await self._run(
            f"declaring rate limit {name!r}", lambda c: c.fetchrow(self._declare, *args)
        )
        return _record(row)

    async def set(self, name: str, limit: RateLimit) -> None:
        args = (check_rate_name(name), *_columns(check_rate_limit(limit)))
        await self._run(f"setting rate limit {name!r}", lambda c: c.execute(self._set, *args))

    async def take(self, name: str, key: str, want: int) -> RateGrant:
        check_grant_request(name, key, want)
        grant: RateGrant = await self._run(
            f"taking start grants of rate limit {name!r}",
            lambda conn: self._grants.take(conn, name, key, want),
        )
        return grant

    async def limits(self) -> dict[str, RateLimit]:
        rows = await self._run("reading rate limits", lambda c: c.fetch(self._list))
        return {row["name"]: _record(row) for row in rows}


def _columns(limit: RateLimit) -> tuple[int, float, int]:
    return limit.rate, limit.per.total_seconds(), limit.burst


def _record(row: Any) -> RateLimit:
    return RateLimit(rate=row["rate"], per=timedelta(seconds=row["per_s"]), burst=row["burst"])


class RateLimitMethods:
    """The store port's rate-limit methods, delegated to a lazily made rates object."""

    _schema: str
    _rates_impl: RateLimitsOnPostgres | None = None

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    @property
    def _rates(self) -> RateLimitsOnPostgres:
        if self._rates_impl is None:
            self._rates_impl = RateLimitsOnPostgres(quote_schema(self._schema), read=self._read)
        return self._rates_impl

    async def declare_rate_limit(self, name: str, limit: RateLimit) -> RateLimit:
        return await self._rates.declare(name, limit)

    async def set_rate_limit(self, name: str, limit: RateLimit) -> None:
        await self._rates.set(name, limit)

    async def take_rate_grants(self, name: str, *, key: str = "", want: int = 1) -> RateGrant:
        return await self._rates.take(name, key, want)

    async def rate_limits(self) -> dict[str, RateLimit]:
        return await self._rates.limits()
