"""The group-commit writer: one task, one connection, one transaction per batch.

Callers enqueue a write op and await its future. The writer takes everything
queued (up to ``max_batch``) and runs the whole batch as one function on the
connection's thread (:func:`run_batch`): ``BEGIN IMMEDIATE`` (so
``busy_timeout`` applies; a DEFERRED read-then-write would fail at once with
SQLITE_BUSY_SNAPSHOT), the plan (:mod:`.batch`), a few ``executemany`` calls,
``COMMIT``. One hop per batch: the loop keeps encoding the next batch while
SQLite writes this one. Each caller then gets its own result or error: a
lost compare-and-set fails only its own caller.

Failure handling:

- busy / full / unavailable: the transaction is rolled back and every op of
  the batch gets that error (nothing of the batch was written);
- any other error (a bug, a constraint we did not expect): the batch is rolled
  back and each op is retried alone, so one bad write cannot fail the others.

Cancellation: a caller cancelled before its batch starts is dropped; one
cancelled while its batch runs does not stop the batch (its outcome is then
unknown to it, as the port says: re-read). The writer task itself is only
cancelled by ``close()`` when a graceful close is itself cancelled; the batch
on the thread then still finishes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import Callable
from typing import Any

from chongming.errors import SchemaError, StoreBusy, StoreError, StoreFull, StoreUnavailable
from chongming.stores.sqlite import durable, limits, nodes, queue, rates, retention, schedules
from chongming.stores.sqlite.batch import (
    INSERT_TRANSITION,
    CommandOp,
    CreateOp,
    SaveOp,
    WriteOp,
    plan_batch,
)
from chongming.stores.sqlite.connection import SqliteConnection
from chongming.stores.sqlite.errors import translate
from chongming.stores.sqlite.rows import COMMAND_COLUMNS, command_from_row, dump

__all__ = ["BatchOutcome", "Writer", "run_batch"]

_LINGER_TURNS = 4
_WHOLE_BATCH_ERRORS = (StoreBusy, StoreFull, StoreUnavailable, SchemaError)
#: Command actions that make a command claimable (so a skipped claim look must look again).
_CLAIMABLE_ACTIONS = frozenset({"submit", "release"})
#: Actions that read the store clock (raised to its high-water mark once per batch).
_NODE_ACTIONS = frozenset(
    {
        "register_node",
        "renew_node",
        "release_node",
        "nodes",
        "claim_tasks",
        "start_claimed",
        *limits.ACTIONS,
        *durable.ACTIONS,
        *rates.ACTIONS,
        *schedules.ACTIONS,
    }
)

_INSERT_COMMAND = (
    f"INSERT OR IGNORE INTO commands ({', '.join(COMMAND_COLUMNS)})"
    f" VALUES ({', '.join('?' * len(COMMAND_COLUMNS))})"
)
_CLAIM_COMMANDS = (
    "UPDATE commands SET claimed_by = ?, lease_expires_at = ? WHERE command_id IN ("
    " SELECT command_id FROM commands WHERE completed_at IS NULL"
    " AND (target_owner IS NULL OR target_owner = ?)"
    " AND (claimed_by IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ?)"
    " ORDER BY created_at, command_id LIMIT ?)"
    f" RETURNING {', '.join(COMMAND_COLUMNS)}"
)
#: The earliest running claim lease the claimer could take over once it runs out.
_NEXT_EXPIRY = (
    "SELECT min(lease_expires_at) FROM commands WHERE completed_at IS NULL"
    " AND (target_owner IS NULL OR target_owner = ?) AND lease_expires_at > ?"
)
_COMPLETE_COMMAND = (
    "UPDATE commands SET completed_at = ?, outcome = ?, lease_expires_at = NULL"
    " WHERE command_id = ? AND claimed_by = ? AND completed_at IS NULL"
)
_RELEASE_COMMAND = (
    "UPDATE commands SET claimed_by = NULL, lease_expires_at = NULL"
    " WHERE command_id = ? AND claimed_by = ? AND completed_at IS NULL"
)
_VERSIONS = (
    "SELECT task_id, status_version FROM tasks WHERE task_id IN (SELECT value FROM json_each(?))"
)


class _Inconsistent(Exception):
    """A statement changed another number of rows than the plan said."""


class Writer:
    """Owns the write connection; see the module docstring."""

    def __init__(
        self,
        conn: SqliteConnection,
        *,
        where: str,
        busy_timeout: float,
        clock: Callable[[], int],
        on_command_submitted: Callable[[], None],
        max_batch: int = 1000,
    ) -> None:
        self._conn = conn
        self._where = where
        self._busy_timeout = busy_timeout
        self._clock = clock
        self._on_command_submitted = on_command_submitted
        self._max_batch = max_batch
        self._pending: list[WriteOp] = []
        self._in_flight: list[WriteOp] = []
        self._wake = asyncio.Event()
        self._stopping = False
        self.batches = 0
        self.ops = 0
        #: Committed writes that may have made a command claimable (submit, release).
        self.claimable_writes = 0

    # -- caller side ---------------------------------------------------------

    def submit(self, op: WriteOp) -> None:
        self._pending.append(op)
        self._wake.set()

    def submit_group(self, ops: list[WriteOp], group: int) -> None:
        """Queue ``ops`` to be committed in one transaction (never cut by ``max_batch``)."""
        for op in ops:
            op.group = group
        self._pending.extend(ops)
        self._wake.set()

    def request_stop(self) -> None:
        """Finish what is queued, then return from :meth:`run`."""
        self._stopping = True
        self._wake.set()

    def fail_leftovers(self) -> None:
        """After the task ended: nobody will run these ops any more."""
        for op in self._in_flight:
            _fail(
                op,
                StoreError(
                    f"{self._where}: the store was closed while this write was in flight;"
                    " its outcome is unknown, re-read to find out"
                ),
            )
        for op in self._pending:
            _fail(op, StoreError(f"{self._where}: the store was closed before this write ran"))
        self._in_flight = []
        self._pending = []

    # -- the task ------------------------------------------------------------

    async def run(self) -> None:
        while True:
            if not self._pending:
                if self._stopping:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            # Linger while the queue still grows (a few loop turns at most):
            # callers the last commit just answered queue their next write,
            # and they join this transaction instead of waiting for the next.
            for _ in range(_LINGER_TURNS):
                seen = len(self._pending)
                if seen >= self._max_batch:
                    break
                await asyncio.sleep(0)
                if len(self._pending) == seen:
                    break
            cut = self._cut()
            batch = self._pending[:cut]
            del self._pending[:cut]
            live = [op for op in batch if not op.future.done()]
            if live:
                self._in_flight = live
                await self._commit(live)
                self._in_flight = []

    def _cut(self) -> int:
        """Up to ``max_batch`` ops, extended to the end of a group it would split."""
        pending = self._pending
        cut = min(self._max_batch, len(pending))
        group = pending[cut - 1].group
        if group:
            while cut < len(pending) and pending[cut].group == group:
                cut += 1
        return cut

    async def _commit(self, ops: list[WriteOp]) -> None:
        try:
            outcome = await self._conn.run(run_batch, ops, self._clock())
        except sqlite3.Error as raw:
            error: Exception = translate(raw, where=self._where, busy_timeout=self._busy_timeout)
        except (StoreError, _Inconsistent) as failure:
            error = failure
        except Exception as bug:  # a bug in planning must not kill the writer
            for op in ops:
                _fail(op, StoreError(f"{self._where}: internal error in the writer: {bug!r}"))
            return
        else:
            self._settle(ops, outcome)
            return
        if isinstance(error, _WHOLE_BATCH_ERRORS):
            for op in ops:
                # One instance per caller: a shared exception would collect every traceback.
                _fail(op, type(error)(*error.args))
        elif len(ops) == 1:
            _fail(ops[0], self._as_store_error(error))
        else:
            for op in ops:
                # One by one: a single bad write must not fail its neighbours.
                await self._commit([op])

    def _as_store_error(self, error: Exception) -> StoreError:
        if isinstance(error, StoreError):
            return error
        return StoreError(f"{self._where}: {error}")

    def _settle(self, ops: list[WriteOp], outcome: BatchOutcome) -> None:
        self.batches += 1
        self.ops += len(ops)
        submitted = False
        for op in ops:
            failure = outcome.errors.get(id(op))
            if failure is not None:
                _fail(op, failure)
            else:
                if isinstance(op, CommandOp) and op.action in _CLAIMABLE_ACTIONS:
                    self.claimable_writes += 1
                    submitted = submitted or op.action == "submit"
                _succeed(op, outcome.results.get(id(op)))
        if submitted:
            self._on_command_submitted()


@dataclasses.dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one committed batch did: the losers' errors and the commands' results."""

    errors: dict[int, StoreError]
    results: dict[int, Any]


def run_batch(conn: sqlite3.Connection, ops: list[WriteOp], now: int) -> BatchOutcome:
    """The whole batch as one transaction (blocking: runs on the connection's thread).

    Planned optimistically first (no read); if a statement changes another
    number of rows than planned, the batch is planned again from the stored
    versions, in a new transaction.
    """
    try:
        return _transaction(conn, ops, now, optimistic=True)
    except _Inconsistent:
        return _transaction(conn, ops, now, optimistic=False)


def _transaction(
    conn: sqlite3.Connection, ops: list[WriteOp], now: int, *, optimistic: bool
) -> BatchOutcome:
    conn.execute("BEGIN IMMEDIATE")
    try:
        versions = None if optimistic else _read_versions(conn, ops)
        plan = plan_batch(ops, versions, now)
        for phase in plan.phases:
            try:
                cursor = conn.executemany(phase.sql, phase.rows)
            except sqlite3.IntegrityError as error:
                if optimistic:  # a create of an id that exists: re-plan
                    raise _Inconsistent(str(error)) from None
                raise
            if phase.checked and cursor.rowcount != len(phase.rows):
                raise _Inconsistent(f"{phase.sql!r}: {cursor.rowcount} of {len(phase.rows)}")
        if plan.transitions:
            conn.executemany(INSERT_TRANSITION, plan.transitions)
        if any(op.action in _NODE_ACTIONS for op in plan.commands):
            now = nodes.advance_clock(conn, now)
        results = {}
        for op in plan.commands:
            try:
                results[id(op)] = _run_command(conn, op, now)
            except StoreError as refused:  # e.g. NodeConflict: that op's answer, nothing written
                plan.errors[id(op)] = refused
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return BatchOutcome(errors=plan.errors, results=results)


def _rollback(conn: sqlite3.Connection) -> None:
    if not conn.in_transaction:
        return  # SQLite already rolled back (it does for some FULL/BUSY/IOERR errors)
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass  # the transaction is gone either way; the connection stays usable


def _read_versions(conn: sqlite3.Connection, ops: list[WriteOp]) -> dict[str, int]:
    ids = {op.task_id for op in ops if isinstance(op, CreateOp | SaveOp)}
    if not ids:
        return {}
    rows = conn.execute(_VERSIONS, (dump(sorted(ids)),)).fetchall()
    return {row[0]: row[1] for row in rows}


def _run_command(conn: sqlite3.Connection, op: CommandOp, now: int) -> Any:
    if op.action == "submit":
        conn.execute(_INSERT_COMMAND, op.params)
        return None
    if op.action == "claim":
        owner, lease_micros, limit = op.params
        rows = conn.execute(_CLAIM_COMMANDS, (owner, now + lease_micros, owner, now, limit))
        claimed = [command_from_row(row) for row in rows.fetchall()]
        claimed.sort(key=lambda c: (c.created_at, c.command_id))
        (next_expiry,) = conn.execute(_NEXT_EXPIRY, (owner, now)).fetchone()
        return claimed, next_expiry
    if op.action == "complete":
        command_id, owner, outcome = op.params
        return conn.execute(_COMPLETE_COMMAND, (now, outcome, command_id, owner)).rowcount == 1
    if op.action == "release":
        return conn.execute(_RELEASE_COMMAND, op.params).rowcount == 1
    if op.action == "register_node":
        info, ttl_micros = op.params
        return nodes.register_node(conn, info, ttl_micros, now)
    if op.action == "renew_node":
        owner, incarnation, ttl_micros = op.params
        return nodes.renew_node(conn, owner, incarnation, ttl_micros, now)
    if op.action == "release_node":
        owner, incarnation = op.params
        nodes.release_node(conn, owner, incarnation, now)
        return None
    if op.action == "nodes":
        return nodes.list_nodes(conn, now)
    if op.action == "enqueue":
        return queue.enqueue(conn, *op.params, now=now)
    if op.action == "release_claim":
        return queue.release_claim(conn, *op.params)
    if op.action == "claim_tasks":
        return queue.claim_tasks(conn, *op.params, now=now)
    if op.action == "start_claimed":
        return queue.start_claimed(conn, *op.params)
    if op.action in limits.ACTIONS:
        return limits.run_action(conn, op.action, op.params, now)
    if op.action in durable.ACTIONS:
        return durable.run_action(conn, op.action, op.params, now)
    if op.action in retention.ACTIONS:
        return retention.run_action(conn, op.action, op.params, now)
    if op.action in rates.ACTIONS:
        return rates.run_action(conn, op.action, op.params, now)
    if op.action in schedules.ACTIONS:
        return schedules.run_action(conn, op.action, op.params, now)
    raise TypeError(f"unknown command action {op.action!r}")


def _succeed(op: WriteOp, result: Any) -> None:
    if not op.future.done():
        op.future.set_result(result)


def _fail(op: WriteOp, error: BaseException) -> None:
    if not op.future.done():
        op.future.set_exception(error)
