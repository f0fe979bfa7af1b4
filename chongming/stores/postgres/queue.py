"""The work queue on PostgreSQL: enqueue once per idempotency key, claim with SKIP LOCKED.

An enqueue is one short transaction. The key row goes in first with ``ON
CONFLICT DO NOTHING``: a conflict never aborts the transaction, and an
insert racing an uncommitted twin waits for it, so when the twin rolls back
this one gets the key and exactly one task exists. The stored digest of the
input (name, version, arguments) decides between "the same task" and
:class:`IdempotencyConflict` on that path too. Concurrent enqueues share
that transaction and its one statement (group commit, enqueues.py); what a
batch cannot decide runs here one by one, so the answers are the same. An
enqueue inside the caller's transaction (``connection=``) runs alone in it.
A trace carrier goes into ``trace_carriers`` in the same transaction.

Claims are in :mod:`chongming.stores.postgres.claims`;
:mod:`chongming.stores.postgres.queue_methods` gives the store the port's
queue methods.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from chongming.errors import (
    ConfigurationError,
    DuplicateTaskId,
    IdempotencyConflict,
    PayloadError,
    StoreError,
    StoreUnavailable,
)
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.durable import Fact, check_enqueue_facts
from chongming.stores.postgres import rows
from chongming.stores.postgres.claims import Claims
from chongming.stores.postgres.driver import is_connection_error
from chongming.stores.postgres.enqueues import (
    EnqueueBatcher,
    Pending,
    batch_arguments,
    batch_insert_sql,
    is_plain,
    plain_arguments,
    plain_insert_sql,
)
from chongming.stores.postgres.listener import CommandListener
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS
from chongming.stores.queue import (
    Enqueued,
    check_enqueued,
    check_trace_carrier,
    decode_trace_carrier,
    encode_trace_carrier,
    input_digest,
)

__all__ = ["WorkQueue"]

log = logging.getLogger("chongming.stores.postgres")

T = TypeVar("T")
Work = Callable[[Any], Awaitable[T]]
Runner = Callable[[str, Work[Any]], Awaitable[Any]]

_SELECT = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)


def _insert_task(schema: str) -> str:
    values = []
    for index, (name, kind) in enumerate(SNAPSHOT_COLUMNS, start=1):
        if name == "tags":
            values.append(f"ARRAY(SELECT jsonb_array_elements_text(${index}::jsonb))")
        else:
            values.append(f"${index}::{kind}")
    # The NOTIFY is delivered at commit (never on rollback): idle workers wake then.
    notify = len(SNAPSHOT_COLUMNS) + 1
    return (
        f"WITH inserted AS (INSERT INTO {schema}.tasks ({_SELECT}) VALUES ({', '.join(values)})"
        " ON CONFLICT (task_id) DO NOTHING RETURNING task_id)"
        f" SELECT task_id, pg_notify(${notify}, '') FROM inserted"
    )


class _TakenId(Exception):
    """A batch met a taken task id whose key was free: it is rolled back and run one by one."""


def _settle(
    pending: Pending, result: Enqueued | None = None, *, error: BaseException | None = None
) -> None:
    future = pending.future
    if future is None or future.done():
        return  # its caller stopped waiting
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class WorkQueue:
    """Enqueue and claim; the store supplies the I/O (see :class:`CommandsAndNodes`)."""

    def __init__(
        self,
        schema: str,
        *,
        read: Runner,
        once: Runner,
        fail: Callable[[BaseException, str], Any],
        attempts: int,
        limit: int | None,
        listener: CommandListener,
    ) -> None:
        self._listener = listener
        self._channel = listener.channel
        self._read = read
        self._once = once
        self._fail = fail
        self._attempts = attempts
        self._limit = limit
        self._insert_task = _insert_task(schema)
        self._insert_transition = (
            f"INSERT INTO {schema}.transitions (task_id, version, from_status, to_status, at,"
            " trigger, actor, reason, attempt) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            " ON CONFLICT DO NOTHING"
        )
        self._insert_key = (
            f"INSERT INTO {schema}.idempotency_keys (idempotency_key, task_id, digest)"
            " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING task_id"
        )
        self._get_key = (
            f"SELECT task_id, digest FROM {schema}.idempotency_keys WHERE idempotency_key = $1"
        )
        self._get_task = f"SELECT {_SELECT} FROM {schema}.tasks WHERE task_id = $1"
        self.claims = Claims(schema, read=read, once=once, fail=fail)
        self._insert_batch = batch_insert_sql(schema)
        self._insert_batch_carried = batch_insert_sql(schema, carriers=True)
        self._insert_plain = plain_insert_sql(schema)
        self._insert_fact = (
            f"INSERT INTO {schema}.durable_facts (task_id, name, payload, key)"
            " VALUES ($1, $2, $3::jsonb, $4)"
        )
        self._insert_carrier = (
            f"INSERT INTO {schema}.trace_carriers (task_id, carrier) VALUES ($1, $2::jsonb)"
            " ON CONFLICT (task_id) DO UPDATE SET carrier = EXCLUDED.carrier"
        )
        self._carriers = (
            f"SELECT task_id, carrier::text FROM {schema}.trace_carriers"
            " WHERE task_id = ANY($1::text[])"
        )
        self._batcher = EnqueueBatcher(self._run_batch)
        self._release = (
            f"UPDATE {schema}.tasks SET owner = NULL WHERE task_id = $1 AND owner = $2"
            " AND status = 'queued' AND status_version = $3 RETURNING task_id"
        )
        self._histories = (
            "SELECT task_id, version, from_status, to_status, at, trigger, actor, reason,"
            f" attempt FROM {schema}.transitions WHERE task_id = ANY($1::text[])"
            " ORDER BY task_id, version"
        )

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition],
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> Enqueued:
        carrier = check_trace_carrier(trace_carrier)
        pending = self._pending(
            snapshot, transitions, None if carrier is None else encode_trace_carrier(carrier)
        )
        given = check_enqueue_facts(facts, snapshot.task_id, self._limit)
        if given:
            if connection is not None:
                raise ConfigurationError("facts= cannot join the caller's transaction yet")
            pending.facts = [(f.name, _json(f.payload), f.key) for f in given]
            return await self._alone(pending, unknown=False)  # task and facts: one transaction
        if connection is not None:
            what = f"enqueueing task {snapshot.task_id!r}"
            return await self._in_callers_transaction(connection, self._work(pending), what)
        result: Enqueued = await self._batcher.submit(pending)
        return result

    async def enqueue_many(
        self,
        items: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
    ) -> list[Enqueued | Exception]:
        """Every item checked and encoded first (a bad one raises, nothing is written).

        Then they go to the batcher at once: a few statements for the lot
        (``max_batch`` each), each item answered as :meth:`enqueue` would be.
        Inside the caller's transaction they run one by one on its connection.
        """
        carrier = check_trace_carrier(trace_carrier)
        text = None if carrier is None else encode_trace_carrier(carrier)
        pendings = [self._pending(snapshot, steps, text) for snapshot, steps in items]
        results: list[Enqueued | Exception] = []
        if connection is not None:
            for pending in pendings:
                what = f"enqueueing task {pending.task_id!r}"
                try:
                    results.append(
                        await self._in_callers_transaction(connection, self._work(pending), what)
                    )
                except Exception as error:
                    results.append(error)
            return results
        for future in self._batcher.submit_many(pendings):
            try:
                results.append(await future)
            except Exception as error:
                results.append(error)
        return results

    def _pending(
        self, snapshot: TaskSnapshot, transitions: Sequence[Transition], carrier: str | None
    ) -> Pending:
        """One enqueue checked and encoded (the digest only where a key needs it)."""
        check_enqueued(snapshot)
        key = snapshot.idempotency_key
        return Pending(
            snapshot=snapshot,
            key=key,
            digest=None if key is None else input_digest(snapshot),
            params=rows.encode(rows.full_params, snapshot, self._limit),
            transitions=rows.transition_rows(transitions, snapshot.task_id),
            carrier=carrier,
            plain=is_plain(snapshot, transitions),
        )

    def _work(self, pending: Pending) -> Callable[[Any], Awaitable[Enqueued]]:
        """The single-task enqueue: one transaction on ``conn``."""
        task_id, key, digest = pending.task_id, pending.key, pending.input

        async def work(conn: Any) -> Enqueued:
            async with conn.transaction():
                if (
                    key is not None
                    and await conn.fetchval(self._insert_key, key, task_id, digest) is None
                ):
                    return await self._twin(conn, key, digest)
                if await conn.fetchval(self._insert_task, *pending.params, self._channel) is None:
                    raise DuplicateTaskId(task_id)
                if pending.transitions:
                    await conn.executemany(self._insert_transition, pending.transitions)
                if pending.carrier is not None:
                    await conn.execute(self._insert_carrier, task_id, pending.carrier)
                if pending.facts:
                    await conn.executemany(
                        self._insert_fact, [(task_id, *fact) for fact in pending.facts]
                    )
                stored = await conn.fetchrow(self._get_task, task_id)
            return Enqueued(snapshot=rows.snapshot_from_row(stored), created=True)

        return work

    async def _alone(self, pending: Pending, *, unknown: bool) -> Enqueued:
        """One enqueue by itself, with retries; ``unknown``: it may have been written already."""
        what = f"enqueueing task {pending.task_id!r}"
        work = self._work(pending)
        for _ in range(self._attempts):
            if unknown:
                # The outcome is unknown: ours if the row is there with our input.
                stored = await self._read(
                    what, lambda c: c.fetchrow(self._get_task, pending.task_id)
                )
                if stored is not None:
                    found = rows.snapshot_from_row(stored)
                    if (
                        input_digest(found) == pending.input
                        and found.idempotency_key == pending.key
                    ):
                        return Enqueued(snapshot=found, created=True)
                    if pending.key is None:
                        raise DuplicateTaskId(pending.task_id)
            try:
                result: Enqueued = await self._once(what, work)
                return result
            except StoreError:
                raise
            except Exception as error:
                if not is_connection_error(error):
                    self._fail(error, what)
            unknown = True
        raise StoreUnavailable(f"{what}: the connection kept failing; it was not written")

    async def _run_batch(self, batch: list[Pending]) -> None:
        """Write ``batch`` in one transaction and answer every caller (see enqueues.py)."""
        what = f"enqueueing {len(batch)} tasks"
        carried = any(pending.carrier is not None for pending in batch)
        if not carried and all(pending.plain for pending in batch):
            sql, arguments = self._insert_plain, plain_arguments(batch, self._channel)
        else:
            arguments = batch_arguments(batch, self._channel, carriers=carried)
            sql = self._insert_batch_carried if carried else self._insert_batch

        async def work(conn: Any) -> list[Any]:
            async with conn.transaction():
                found: list[Any] = await conn.fetch(sql, *arguments)
                if any(row["keyed"] and not row["created"] for row in found):
                    raise _TakenId  # a key would point at someone else's task: undo it all
            return found

        try:
            found = await self._once(what, work)
        except _TakenId:
            await self._each_alone(batch, unknown=False)
            return
        except StoreError as error:
            for pending in batch:
                _settle(pending, error=error)
            return
        except Exception as error:
            await self._each_alone(batch, unknown=is_connection_error(error))
            return
        twins = []
        for pending, row in zip(batch, found, strict=True):
            if row["created"]:
                _settle(pending, Enqueued(snapshot=pending.snapshot, created=True))
            elif pending.key is None:
                _settle(pending, error=DuplicateTaskId(pending.task_id))
            else:
                twins.append(pending)
        for pending in twins:  # after the commit: the key's holder is stored
            try:
                twin = await self._read(what, self._twin_of(pending))
            except Exception as error:
                _settle(pending, error=error)
            else:
                _settle(pending, twin)

    def _twin_of(self, pending: Pending) -> Callable[[Any], Awaitable[Enqueued]]:
        key = pending.key
        assert key is not None
        return lambda conn: self._twin(conn, key, pending.input)

    async def _each_alone(self, batch: list[Pending], *, unknown: bool) -> None:
        async def one(pending: Pending) -> None:
            try:
                _settle(pending, await self._alone(pending, unknown=unknown))
            except Exception as error:
                _settle(pending, error=error)

        await asyncio.gather(*(one(pending) for pending in batch))

    async def _in_callers_transaction(
        self, connection: object, work: Callable[[Any], Awaitable[Enqueued]], what: str
    ) -> Enqueued:
        """Run the enqueue on the caller's connection, under a savepoint of its transaction.

        No retries: the transaction is the caller's, and so is its outcome.
        """
        in_transaction = getattr(connection, "is_in_transaction", None)
        is_closed = getattr(connection, "is_closed", None)
        if not callable(in_transaction) or not callable(is_closed):
            raise ConfigurationError(
                f"connection= takes an asyncpg connection, got {type(connection).__name__}"
            )
        if is_closed():
            raise ConfigurationError("connection= is closed")
        if not in_transaction():
            raise ConfigurationError(
                "connection= is not inside a transaction: open one (async with "
                "conn.transaction(): ...) so the task exists only if it commits"
            )
        try:
            return await work(connection)
        except (StoreError, ConfigurationError, PayloadError):
            raise
        except Exception as error:
            return self._fail(error, what)  # type: ignore[no-any-return]

    async def _twin(self, conn: Any, key: str, digest: str) -> Enqueued:
        row = await conn.fetchrow(self._get_key, key)
        if row is None:  # the holder went between the two statements: rare, refuse plainly
            raise IdempotencyConflict(key, "<gone>")
        if row["digest"] != digest:
            raise IdempotencyConflict(key, row["task_id"])
        stored = await conn.fetchrow(self._get_task, row["task_id"])
        if stored is None:
            raise IdempotencyConflict(key, row["task_id"])
        return Enqueued(snapshot=rows.snapshot_from_row(stored), created=False)

    async def histories(self, task_ids: Collection[str]) -> dict[str, list[Transition]]:
        found: dict[str, list[Transition]] = {task_id: [] for task_id in task_ids}
        if not found:
            return found
        ids = sorted(found)
        records = await self._read("reading histories", lambda c: c.fetch(self._histories, ids))
        for row in records:
            transition = rows.transition_from_row(row)
            found[transition.task_id].append(transition)
        return found

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        if not task_ids:
            return {}
        ids = sorted(set(task_ids))
        found = await self._read("reading trace carriers", lambda c: c.fetch(self._carriers, ids))
        return {row[0]: carrier for row in found if (carrier := decode_trace_carrier(row[1]))}

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        # Idempotent: a second run after an unknown outcome finds it released
        # (owner NULL) and answers False, so ask what the row says after a failure.
        what = f"releasing the claim on {task_id!r}"
        try:
            released = await self._once(
                what, lambda c: c.fetchval(self._release, task_id, owner, expect_version)
            )
            return released is not None
        except StoreError:
            raise
        except Exception as error:
            if not is_connection_error(error):
                self._fail(error, what)
        row = await self._read(what, lambda c: c.fetchrow(self._get_task, task_id))
        return row is not None and row["owner"] is None and row["status"] == "queued"

    async def wait_hint(self) -> None:
        """Return when a task may have been enqueued (a hint: claim afterwards)."""
        await self._listener.wait()

    async def close(self, grace: float = 10.0) -> None:
        try:
            await self._batcher.close(grace)
        finally:
            await self._listener.close()


def _json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
