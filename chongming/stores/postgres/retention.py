"""Retention on PostgreSQL: one statement per batch, rows taken with ``SKIP LOCKED``.

A batch picks up to ``limit`` terminal tasks finished before the cut, oldest
first, through the partial index of finished tasks (migration
``*_retention``), locking them ``FOR UPDATE SKIP LOCKED``: a row another
transaction holds (a late write to a finished task, a second prune) is
skipped, never waited for. The same statement deletes every row that hangs
off the picked tasks (data-modifying CTEs, one snapshot), then the tasks.
The claim path locks only ``queued`` rows, which a prune never picks, so a
claim and a prune never wait on each other's rows; a batch's locks live for
one statement.

The literal status list in the pick is the partial index's predicate, so the
planner can use the index for a prepared (generic) plan; the status filter
the caller asked for is applied on top of it.

A batch waits for a lock at most :data:`PRUNE_LOCK_TIMEOUT` (``SET LOCAL
lock_timeout``): the pick skips locked task rows, but the deletes of the rows
hanging off them may meet a lock (a transaction holding one of those rows, a
migration's table lock). A batch that waits longer fails with
:class:`~chongming.errors.StoreBusy`, having deleted nothing, instead of
sitting in the lock queue (where every later lock request on the same rows
would queue behind it); the pruner tries again at its next pass.

Two prunes at once (two workers with ``retention=``) take disjoint rows; a
retry after a connection error deletes what is left, so the call is run by
the bounded read retry. The count it returns may then miss a batch whose
commit was lost with its connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chongming.state.status import TERMINAL_STATUSES
from chongming.stores.postgres.schema import quote_schema
from chongming.stores.retention import TASK_TABLES, PruneSelection, check_batch, check_selection

__all__ = ["PRUNE_LOCK_TIMEOUT", "RetentionMethods", "RetentionOnPostgres"]

Runner = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]

#: Longest a prune batch waits for any lock (PostgreSQL interval text).
PRUNE_LOCK_TIMEOUT = "1s"

_TERMINAL = ", ".join(f"'{status.value}'" for status in sorted(TERMINAL_STATUSES))


def _where(schema: str) -> str:
    return (
        f"FROM {schema}.tasks WHERE status IN ({_TERMINAL}) AND finished_at < $1"
        " AND status = ANY($2::text[])"
        " AND ($3::text[] IS NULL OR name = ANY($3::text[]))"
        " AND NOT (name = ANY($4::text[]))"
        " AND ($5::text[] IS NULL OR task_id = ANY($5::text[]))"
        # a parent stays while a child of its lives (the child's end is the parent's fact)
        f" AND NOT EXISTS (SELECT 1 FROM {schema}.tasks AS c"
        f" WHERE c.parent_id = {schema}.tasks.task_id AND c.status NOT IN ({_TERMINAL}))"
    )


class RetentionOnPostgres:
    """The statements; the store supplies the connection runner."""

    def __init__(self, schema: str, *, read: Runner) -> None:
        self._run = read
        where = _where(schema)
        deletes = ",\n".join(
            f" d_{table} AS (DELETE FROM {schema}.{table}"
            " WHERE task_id IN (SELECT task_id FROM picked))"
            for table in TASK_TABLES
        )
        self._prune = (
            f"WITH picked AS (SELECT task_id {where}"
            " ORDER BY finished_at LIMIT $6 FOR UPDATE SKIP LOCKED),\n"
            f"{deletes},\n"
            f" gone AS (DELETE FROM {schema}.tasks WHERE task_id IN (SELECT task_id FROM picked)"
            " RETURNING 1)\n"
            " SELECT count(*)::int FROM gone"
        )
        self._count = f"SELECT count(*)::int {where}"

    @staticmethod
    def _args(selection: PruneSelection) -> tuple[Any, ...]:
        return (
            selection.finished_before,
            [str(status) for status in sorted(selection.statuses)],
            None if selection.names is None else sorted(selection.names),
            sorted(selection.exclude_names),
            None if selection.task_ids is None else sorted(selection.task_ids),
        )

    async def prune(self, selection: PruneSelection, limit: int) -> int:
        args = (*self._args(check_selection(selection)), check_batch(limit, field="limit"))

        async def batch(conn: Any) -> int:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = '{PRUNE_LOCK_TIMEOUT}'")
                deleted: int = await conn.fetchval(self._prune, *args)
                return deleted

        deleted: int = await self._run("pruning terminal tasks", batch)
        return deleted

    async def count(self, selection: PruneSelection) -> int:
        args = self._args(check_selection(selection))
        found: int = await self._run(
            "counting prunable tasks", lambda conn: conn.fetchval(self._count, *args)
        )
        return found


class RetentionMethods:
    """The store port's retention methods, delegated to a lazily made retention object."""

    _schema: str
    _retention_impl: RetentionOnPostgres | None = None

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    @property
    def _retention(self) -> RetentionOnPostgres:
        if self._retention_impl is None:
            self._retention_impl = RetentionOnPostgres(quote_schema(self._schema), read=self._read)
        return self._retention_impl

    async def prune_tasks(self, selection: PruneSelection, *, limit: int) -> int:
        return await self._retention.prune(selection, limit)

    async def count_prunable(self, selection: PruneSelection) -> int:
        return await self._retention.count(selection)
