"""Cluster-wide limits on PostgreSQL: one short transaction per lease.

A lease locks the limit's row (``FOR UPDATE``), so the leases of one limit
are decided one at a time across every node; leases of different limits
never wait on each other. Liveness is the node row's lease judged by the
server's ``clock_timestamp()``, read inside that transaction.

A lease is idempotent (it *sets* what the node holds), so after a connection
error with an unknown outcome it simply runs again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from chongming.errors import UnknownClusterLimit
from chongming.stores.limits import (
    ClusterLimit,
    check_capacity,
    check_lease,
    check_limit_name,
    granted_slots,
)
from chongming.stores.postgres.schema import quote_schema

__all__ = ["ClusterLimitMethods", "ClusterLimitsOnPostgres"]

T = TypeVar("T")
Runner = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]

_LIVE = (
    "EXISTS (SELECT 1 FROM {s}.nodes n WHERE n.owner = s.owner"
    " AND n.incarnation = s.incarnation AND n.lease_expires_at > clock_timestamp())"
)


class ClusterLimitsOnPostgres:
    """The statements and transactions; the store supplies the connection runner."""

    def __init__(self, schema: str, *, read: Runner) -> None:
        # Every statement is idempotent, so the read runner's bounded retry is right for all.
        self._run = read
        live = _LIVE.format(s=schema)
        self._declare = (
            f"WITH put AS (INSERT INTO {schema}.cluster_limits (name, capacity) VALUES ($1, $2)"
            " ON CONFLICT (name) DO NOTHING RETURNING capacity)"
            f" SELECT capacity FROM put UNION ALL"
            f" SELECT capacity FROM {schema}.cluster_limits WHERE name = $1 LIMIT 1"
        )
        self._set = (
            f"INSERT INTO {schema}.cluster_limits (name, capacity) VALUES ($1, $2)"
            " ON CONFLICT (name) DO UPDATE SET capacity = EXCLUDED.capacity,"
            " updated_at = clock_timestamp()"
        )
        self._lock = f"SELECT capacity FROM {schema}.cluster_limits WHERE name = $1 FOR UPDATE"
        self._drop_dead = (
            f"DELETE FROM {schema}.cluster_slots AS s WHERE s.name = $1 AND NOT {live}"
        )
        self._others = (
            f"SELECT coalesce(sum(held), 0)::int FROM {schema}.cluster_slots"
            " WHERE name = $1 AND owner <> $2"
        )
        self._is_live = (
            f"SELECT EXISTS (SELECT 1 FROM {schema}.nodes WHERE owner = $1"
            " AND incarnation = $2 AND lease_expires_at > clock_timestamp())"
        )
        self._upsert = (
            f"INSERT INTO {schema}.cluster_slots (name, owner, incarnation, held)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (name, owner)"
            " DO UPDATE SET incarnation = EXCLUDED.incarnation, held = EXCLUDED.held"
        )
        self._delete = f"DELETE FROM {schema}.cluster_slots WHERE name = $1 AND owner = $2"
        self._list_limits = f"SELECT name, capacity FROM {schema}.cluster_limits ORDER BY name"
        self._list_held = (
            f"SELECT s.name, s.owner, s.held FROM {schema}.cluster_slots AS s WHERE {live}"
        )

    async def declare(self, name: str, capacity: int) -> int:
        args = (check_limit_name(name), check_capacity(capacity))
        stored: int = await self._run(
            f"declaring cluster limit {name!r}", lambda c: c.fetchval(self._declare, *args)
        )
        return stored

    async def set(self, name: str, capacity: int) -> None:
        args = (check_limit_name(name), check_capacity(capacity))
        await self._run(f"setting cluster limit {name!r}", lambda c: c.execute(self._set, *args))

    async def lease(self, name: str, owner: str, incarnation: str, want: int, keep: int) -> int:
        check_lease(name, owner, incarnation, want, keep)

        async def lease(conn: Any) -> int:
            async with conn.transaction():
                capacity = await conn.fetchval(self._lock, name)
                if capacity is None:
                    raise UnknownClusterLimit(name)
                await conn.execute(self._drop_dead, name)
                others = await conn.fetchval(self._others, name, owner)
                live = await conn.fetchval(self._is_live, owner, incarnation)
                held = granted_slots(
                    capacity=capacity, held_by_others=others, want=want, keep=keep, live=live
                )
                if held > 0:
                    await conn.execute(self._upsert, name, owner, incarnation, held)
                else:
                    await conn.execute(self._delete, name, owner)
                return held

        held: int = await self._run(f"leasing slots of cluster limit {name!r}", lease)
        return held

    async def limits(self) -> list[ClusterLimit]:
        async def read(conn: Any) -> list[ClusterLimit]:
            async with conn.transaction(readonly=True):
                limits = await conn.fetch(self._list_limits)
                held = await conn.fetch(self._list_held)
            holders: dict[str, dict[str, int]] = {}
            for row in held:
                holders.setdefault(row["name"], {})[row["owner"]] = row["held"]
            return [
                ClusterLimit(
                    name=row["name"], capacity=row["capacity"], holders=holders.get(row["name"], {})
                )
                for row in limits
            ]

        found: list[ClusterLimit] = await self._run("reading cluster limits", read)
        return found


class ClusterLimitMethods:
    """The store port's cluster-limit methods, delegated to a lazily made limits object."""

    _schema: str
    _cluster_impl: ClusterLimitsOnPostgres | None = None

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    @property
    def _cluster(self) -> ClusterLimitsOnPostgres:
        if self._cluster_impl is None:
            self._cluster_impl = ClusterLimitsOnPostgres(
                quote_schema(self._schema), read=self._read
            )
        return self._cluster_impl

    async def declare_cluster_limit(self, name: str, capacity: int) -> int:
        return await self._cluster.declare(name, capacity)

    async def set_cluster_limit(self, name: str, capacity: int) -> None:
        await self._cluster.set(name, capacity)

    async def lease_cluster_slots(
        self, name: str, owner: str, incarnation: str, *, want: int, keep: int
    ) -> int:
        return await self._cluster.lease(name, owner, incarnation, want, keep)

    async def cluster_limits(self) -> list[ClusterLimit]:
        return await self._cluster.limits()
