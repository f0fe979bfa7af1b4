"""``SqliteTaskStore``: the embedded default store.

Two connections, each on its own thread
(:class:`~chongming.stores.sqlite.connection.SqliteConnection`), so the event
loop never blocks on SQLite: a writer connection owned by the group-commit
:class:`~chongming.stores.sqlite.writer.Writer` task, and a reader connection
(WAL lets it read committed data while a write transaction is open, or while
another process holds the write lock). ``":memory:"`` has one database per
connection, so there the reader is the writer connection; a batch's
transaction is one call on that connection's thread, so no read can land
inside it.

A store that is garbage-collected without ``close()`` warns with
``ResourceWarning`` (as asyncio's transports do) and stops its threads; its
threads never keep the interpreter from exiting.

The store clock (command and node leases) is the process wall clock with a
monotonic guard: it never goes backwards within one store, even if the system
clock does. Across processes the node leases are guarded too: every node
decision (register, renew, release, and the ``nodes()`` judgement) raises a
high-water mark kept in the database in the same transaction and judges by
``max(wall clock, high-water)``, so once any process judged a lease expired,
none can judge it alive again after a clock step back (see
:mod:`~chongming.stores.sqlite.nodes`).

Cheap polling: ``claim_commands`` skips its write transaction when nothing
can have become claimable since its last look for the same owner — the
reader connection's ``PRAGMA data_version`` is unchanged (it moves with every
commit of any *other* connection, this store's own writer included), no
submit or release went through this store's writer since (the writer counts
them: on ``":memory:"`` the reader is the writer, whose own commits
``data_version`` never reports), the last look was not cut by its ``limit``,
and no running claim lease it saw has run out yet.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import sqlite3
import time
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from chongming.errors import (
    ConfigurationError,
    DuplicateTaskId,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    TaskNotFound,
    VersionConflict,
)
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.state.status import ACTIVE_STATUSES
from chongming.stores.base import TaskStore, count_key
from chongming.stores.checks import (
    check_command,
    check_limit_arg,
    check_made,
    check_node,
    check_outcome,
    check_transitions,
    check_ttl,
)
from chongming.stores.codec import STATUS_OF, encode_progress
from chongming.stores.identity import IdentityCache
from chongming.stores.nodes import Command, CommandRecord, NodeInfo, NodeRecord, TaskCount
from chongming.stores.queue import (
    ClaimedTask,
    Enqueued,
    Serves,
    check_claim,
    check_enqueued,
    check_exclude_tags,
    check_trace_carrier,
    decode_trace_carrier,
    encode_trace_carrier,
    input_digest,
)
from chongming.stores.sqlite import rows as r
from chongming.stores.sqlite.batch import (
    PATCH_TASK,
    UPDATE_TASK,
    AppendOp,
    CommandOp,
    CreateOp,
    SaveOp,
    TouchOp,
    WriteOp,
)
from chongming.stores.sqlite.connection import SqliteConnection
from chongming.stores.sqlite.durable import DurableOnSqlite
from chongming.stores.sqlite.errors import translate
from chongming.stores.sqlite.files import prepare_database_file
from chongming.stores.sqlite.limits import ClusterLimitsOnSqlite
from chongming.stores.sqlite.nodes import RECORD_SELECT, command_record_from_row
from chongming.stores.sqlite.queue import SELECT_CARRIERS
from chongming.stores.sqlite.schema import migrate, read_version, refuse_newer
from chongming.stores.sqlite.writer import Writer
from chongming.stores.writes import WRITTEN, StateWrite, WriteOutcome, WriteResult

__all__ = ["SqliteTaskStore"]

_TASK_SELECT = f"SELECT {', '.join(r.TASK_NAMES)} FROM tasks"
_ACTIVE = ", ".join(f"'{status.value}'" for status in sorted(ACTIVE_STATUSES))
_COUNTS = "SELECT status, bucket, owner, count(*) FROM tasks"
_COUNTS_GROUP = " GROUP BY status, bucket, owner"
_groups = itertools.count(1)


@dataclasses.dataclass(frozen=True, slots=True)
class _ClaimLook:
    """What the last claim of one owner saw (see "cheap polling" in the module docstring)."""

    data_version: int | None
    claimable_writes: int
    full: bool
    next_expiry: int | None


class SqliteTaskStore(ClusterLimitsOnSqlite, DurableOnSqlite, TaskStore):
    """A :class:`TaskStore` in one SQLite file (or ``":memory:"``).

    ``busy_timeout`` (seconds) is how long a write waits for another
    connection's lock before :class:`StoreBusy`. ``synchronous`` is SQLite's
    durability setting: ``"normal"`` (the default; with WAL a committed
    transaction survives a process kill, the last ones may be lost on power
    loss) or ``"full"`` (fsync on every commit; survives power loss).
    ``max_batch`` bounds how many queued writes share one transaction.

    The database file is created with mode 0600 (its ``-wal``/``-shm`` inherit
    it). A file written by a newer chongming is refused with
    :class:`SchemaError` and left untouched.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        synchronous: Literal["normal", "full"] = "normal",
        max_batch: int = 500,
        max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ConfigurationError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
        if busy_timeout < 0:
            raise ConfigurationError(f"busy_timeout must not be negative, got {busy_timeout}")
        if max_batch < 1:
            raise ConfigurationError(f"max_batch must be at least 1, got {max_batch}")
        self._limit = check_limit(max_payload_bytes)
        self._path = os.fspath(path)
        self._memory = self._path == ":memory:"
        self._where = f"SQLite database {self._path!r}"
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        self._max_batch = max_batch
        self._open_lock = asyncio.Lock()
        self._writer_conn: SqliteConnection | None = None
        self._reader_conn: SqliteConnection | None = None
        self._writer: Writer | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._hint: asyncio.Event | None = None
        self._last_now = 0
        self._looks: dict[str, _ClaimLook] = {}
        #: Claims answered from the last look without a transaction (cheap polling).
        self.claims_skipped = 0
        self._identities = IdentityCache()
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._writer else "not opened")
        return f"<SqliteTaskStore {self._path!r} {state}>"

    @property
    def path(self) -> str:
        return self._path

    def _now_micros(self) -> int:
        """The store clock: wall time that never goes backwards within this store."""
        now = time.time_ns() // 1000
        if now < self._last_now:
            return self._last_now
        self._last_now = now
        return now

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Create the file (0600) if needed, switch to WAL, migrate, start the writer.

        Raises :class:`StoreUnavailable` for a missing directory or read-only
        location and :class:`SchemaError` for a newer schema. Cancellation
        leaves the store closed-over-nothing: the next call opens again.
        """
        if self._closed:
            raise StoreClosed(repr(self))
        if self._writer is not None:
            return
        async with self._open_lock:
            if self._closed:
                raise StoreClosed(repr(self))
            if self._writer is None:
                await self._connect()

    async def _connect(self) -> None:
        connections: list[SqliteConnection] = []
        if not self._memory:
            await asyncio.to_thread(prepare_database_file, self._path)
        try:
            writer_conn = await self._new_connection("writer")
            connections.append(writer_conn)
            await writer_conn.run(_prepare, self._where, self._memory, self._synchronous)
            await writer_conn.run(migrate, self._where, self._now_micros())
            if self._memory:
                reader_conn = writer_conn
            else:
                reader_conn = await self._new_connection("reader")
                connections.append(reader_conn)
                await reader_conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as error:
            await _close_all(connections)
            raise translate(error, where=self._where, busy_timeout=self._busy_timeout) from None
        except BaseException:
            await _close_all(connections)
            raise
        self._writer_conn = writer_conn
        self._reader_conn = reader_conn
        self._writer = Writer(
            writer_conn,
            where=self._where,
            busy_timeout=self._busy_timeout,
            clock=self._now_micros,
            on_command_submitted=self._wake_hint_waiters,
            max_batch=self._max_batch,
        )
        self._writer_task = asyncio.create_task(
            self._writer.run(), name=f"chongming-sqlite-writer {self._path}"
        )

    async def _new_connection(self, role: str) -> SqliteConnection:
        try:
            return await SqliteConnection.open(
                self._path, busy_timeout=self._busy_timeout, label=f"{role} {self._path}"
            )
        except sqlite3.Error as error:
            raise translate(error, where=self._where, busy_timeout=self._busy_timeout) from None

    def __del__(self, _warn: Any = warnings.warn) -> None:
        if getattr(self, "_writer_conn", None) is None:
            return  # never opened, or closed
        _warn(f"unclosed {self!r}", ResourceWarning, source=self)
        for conn in (self._writer_conn, self._reader_conn):
            if conn is not None:
                conn.stop()

    async def close(self) -> None:
        """Finish queued writes, stop the writer, close both connections. Idempotent.

        Cancellation: if ``close()`` itself is cancelled, the writer is cancelled
        (writes in flight then have an unknown outcome) and the connections are
        closed without waiting.
        """
        if self._closed:
            return
        self._closed = True
        self._wake_hint_waiters()
        writer, task = self._writer, self._writer_task
        connections = [c for c in (self._writer_conn, self._reader_conn) if c is not None]
        connections = list(dict.fromkeys(connections))
        self._writer = self._writer_task = None
        self._writer_conn = self._reader_conn = None
        if writer is None or task is None:
            await _close_all(connections)
            return
        writer.request_stop()
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            writer.fail_leftovers()
            for conn in connections:
                conn.stop()  # queued after the batch on the thread, which still finishes
            raise
        writer.fail_leftovers()
        await _close_all(connections)

    # -- plumbing ------------------------------------------------------------

    async def _write(self, op: WriteOp) -> Any:
        if self._writer is None:
            await self.open()
        writer = self._writer
        if writer is None or self._closed:
            raise StoreClosed(repr(self))
        writer.submit(op)
        return await op.future

    def _future(self) -> asyncio.Future[Any]:
        if self._closed:
            raise StoreClosed(repr(self))
        return asyncio.get_running_loop().create_future()

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> Iterable[Any]:
        if self._writer is None:
            await self.open()
        conn = self._reader_conn
        if conn is None or self._closed:
            raise StoreClosed(repr(self))
        try:
            return await conn.fetchall(sql, params)
        except sqlite3.ProgrammingError as error:  # closed concurrently
            raise StoreClosed(repr(self)) from error
        except sqlite3.Error as error:
            raise translate(error, where=self._where, busy_timeout=self._busy_timeout) from None

    # -- snapshots -----------------------------------------------------------

    def _create_op(
        self, snapshot: TaskSnapshot, transitions: Sequence[Transition], trusted: bool = False
    ) -> CreateOp:
        if trusted:  # made and checked by the runtime (see StateWrite.trusted)
            check_made(snapshot)
            row = r.trusted_insert_row(snapshot, self._limit, None)
        else:
            row = r.encode(r.insert_row, snapshot, self._limit)
            check_transitions(transitions, snapshot.task_id)
        return CreateOp(
            future=self._future(),
            task_id=snapshot.task_id,
            version=snapshot.status_version,
            row=row,
            transitions=[r.transition_row(t) for t in transitions],
        )

    def _save_op(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition],
        trusted: bool = False,
    ) -> SaveOp:
        # Encoded once, here; only the mutable columns when the stored identity is known.
        patch = self._identities.holds(snapshot, expect_version)
        if trusted:  # made and checked by the runtime (see StateWrite.trusted)
            encoder = r.trusted_patch_row if patch else r.trusted_full_update_row
            row = encoder(snapshot, self._limit, expect_version)
        else:
            encoder = r.patch_row if patch else r.full_update_row
            row = r.encode(encoder, snapshot, self._limit, expect_version)
            check_transitions(transitions, snapshot.task_id)
        return SaveOp(
            future=self._future(),
            task_id=snapshot.task_id,
            expect_version=expect_version,
            new_version=snapshot.status_version,
            sql=PATCH_TASK if patch else UPDATE_TASK,
            row=row,
            transitions=[r.transition_row(t) for t in transitions],
        )

    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        await self._written(self._create_op(snapshot, transitions), snapshot, None)

    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        op = self._save_op(snapshot, expect_version, transitions)
        await self._written(op, snapshot, expect_version)

    async def _written(self, op: WriteOp, snapshot: TaskSnapshot, expect: int | None) -> None:
        """Write ``op``; remember the identity only of a write known to have committed."""
        try:
            await self._write(op)
        except BaseException:
            self._identities.forget(snapshot.task_id)
            raise
        self._identities.remember(snapshot, expect)

    async def get(self, task_id: str) -> TaskSnapshot | None:
        for row in await self._read(f"{_TASK_SELECT} WHERE task_id = ?", (task_id,)):
            return r.snapshot_from_row(row)
        return None

    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        where: list[str] = []
        params: list[Any] = []
        if query.statuses is not None:
            where.append("status IN (SELECT value FROM json_each(?))")
            params.append(r.dump(sorted(s.value for s in query.statuses)))
        if query.tag is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(tasks.tags) AS t WHERE t.value = ?)")
            params.append(query.tag)
        if query.bucket is not None:
            where.append("bucket = ?")
            params.append(query.bucket)
        if query.buckets is not None:
            where.append("bucket IN (SELECT value FROM json_each(?))")
            params.append(r.dump(sorted(query.buckets)))
        if query.name is not None:
            where.append("name = ?")
            params.append(query.name)
        if query.owner is not None:
            where.append("owner = ?")
            params.append(query.owner)
        sql = _TASK_SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, task_id"
        if query.limit is not None:
            sql += " LIMIT ?"
            params.append(query.limit)
        return [r.snapshot_from_row(row) for row in await self._read(sql, params)]

    # -- history -------------------------------------------------------------

    async def append(self, transitions: Sequence[Transition]) -> None:
        check_transitions(transitions)
        future = self._future()
        if not transitions:
            future.cancel()
            return
        await self._write(
            AppendOp(future=future, transitions=[r.transition_row(t) for t in transitions])
        )

    async def history(self, task_id: str) -> list[Transition]:
        rows = await self._read(
            f"SELECT {', '.join(r.TRANSITION_COLUMNS)} FROM transitions"
            " WHERE task_id = ? ORDER BY version",
            (task_id,),
        )
        return [r.transition_from_row(row) for row in rows]

    async def histories(self, task_ids: Collection[str]) -> dict[str, list[Transition]]:
        found: dict[str, list[Transition]] = {task_id: [] for task_id in task_ids}
        rows = await self._read(
            f"SELECT {', '.join(r.TRANSITION_COLUMNS)} FROM transitions"
            " WHERE task_id IN (SELECT value FROM json_each(?)) ORDER BY task_id, version",
            (r.dump(sorted(found)),),
        )
        for row in rows:
            transition = r.transition_from_row(row)
            found[transition.task_id].append(transition)
        return found

    # -- hot path ------------------------------------------------------------

    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
        owner: str | None = None,
    ) -> None:
        op = TouchOp(
            future=self._future(),
            task_id=task_id,
            progress=encode_progress(progress, self._limit),
            heartbeat=None if heartbeat is None else r.to_micros(heartbeat, "heartbeat"),
            owner=owner,
        )
        await self._write(op)

    # -- commands ------------------------------------------------------------

    async def submit_command(self, command: Command) -> None:
        check_command(command)
        future = self._future()
        await self._write(CommandOp(future=future, action="submit", params=r.command_row(command)))

    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        """Claim as the port says; skipped cheaply when nothing can have changed (see above)."""
        lease = round(check_ttl(lease_seconds, "lease_seconds") * 1_000_000)
        check_limit_arg(limit)
        if self._writer is None:
            await self.open()
        writer = self._writer
        if writer is None or self._closed:
            raise StoreClosed(repr(self))
        version = await self._data_version()
        local = writer.claimable_writes
        look = self._looks.get(owner)
        if (
            look is not None
            and look.data_version == version
            and look.claimable_writes == local
            and not look.full
            and (look.next_expiry is None or self._now_micros() < look.next_expiry)
        ):
            self.claims_skipped += 1
            return []
        self._looks.pop(owner, None)
        future = self._future()
        claimed, next_expiry = await self._write(
            CommandOp(future=future, action="claim", params=(owner, lease, limit))
        )
        self._looks[owner] = _ClaimLook(
            data_version=version,
            claimable_writes=local,
            full=len(claimed) >= limit,
            next_expiry=next_expiry,
        )
        result: list[Command] = claimed
        return result

    async def _data_version(self) -> int | None:
        """The reader's ``PRAGMA data_version`` (``None`` on ``":memory:"``: no other reader)."""
        if self._memory:
            return None
        for row in await self._read("PRAGMA data_version"):
            return int(row[0])
        return None  # pragma: no cover - the pragma always answers

    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        check_outcome(outcome)
        future = self._future()
        done: bool = await self._write(
            CommandOp(future=future, action="complete", params=(command_id, owner, outcome))
        )
        return done

    async def release_command(self, command_id: str, owner: str) -> bool:
        future = self._future()
        released: bool = await self._write(
            CommandOp(future=future, action="release", params=(command_id, owner))
        )
        return released

    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        check_limit_arg(limit)
        order = " ORDER BY created_at DESC, command_id DESC LIMIT ?"
        params: tuple[Any, ...]
        if task_id is None:
            sql, params = RECORD_SELECT + order, (limit,)
        else:
            sql, params = RECORD_SELECT + " WHERE task_id = ?" + order, (task_id, limit)
        found = list(await self._read(sql, params))
        now = await self._guarded_now()
        return [command_record_from_row(row, now) for row in found]

    async def _guarded_now(self) -> int:
        """The store clock for a read: the local guard raised to the stored high-water."""
        rows = await self._read("SELECT high_water FROM store_clock WHERE id = 1")
        high = max((int(row[0]) for row in rows), default=0)
        return max(self._now_micros(), high)

    def _wake_hint_waiters(self) -> None:
        if self._hint is not None:
            self._hint.set()
            self._hint = None

    async def wait_command_hint(self) -> None:
        """Return when this process submits a command (other processes: poll)."""
        if self._closed:
            raise StoreClosed(repr(self))
        if self._hint is None:
            self._hint = asyncio.Event()
        await self._hint.wait()
        if self._closed:
            raise StoreClosed(repr(self))

    # -- nodes -----------------------------------------------------------------

    async def _node_op(self, action: str, *params: Any) -> Any:
        future = self._future()
        return await self._write(CommandOp(future=future, action=action, params=params))

    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        check_node(info)
        ttl = round(check_ttl(ttl_seconds) * 1_000_000)
        record: NodeRecord = await self._node_op("register_node", info, ttl)
        return record

    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        ttl = round(check_ttl(ttl_seconds) * 1_000_000)
        renewed: bool = await self._node_op("renew_node", owner, incarnation, ttl)
        return renewed

    async def release_node(self, owner: str, incarnation: str) -> None:
        await self._node_op("release_node", owner, incarnation)

    async def nodes(self) -> list[NodeRecord]:
        """Judged inside a write transaction that raises the stored clock high-water."""
        found: list[NodeRecord] = await self._node_op("nodes")
        return found

    # -- the work queue (sqlite/queue.py, in the writer's transaction) -------------

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
    ) -> Enqueued:
        check_enqueued(snapshot)
        row = r.encode(r.insert_row, snapshot, self._limit)
        check_transitions(transitions, snapshot.task_id)
        carrier = check_trace_carrier(trace_carrier)
        key = snapshot.idempotency_key
        params = (row, [r.transition_row(t) for t in transitions], snapshot.task_id, key)
        digest = input_digest(snapshot)
        text = None if carrier is None else encode_trace_carrier(carrier)
        if connection is not None:  # the caller's transaction (sqlite/transaction.py)
            # aiosqlite is imported only here, where the caller's connection is checked.
            from chongming.stores.sqlite.transaction import enqueue_in_transaction

            await self.open()  # the schema must exist before the caller's transaction uses it
            return await enqueue_in_transaction(connection, self._path, *params, digest, text)
        created, existing = await self._node_op("enqueue", *params, digest, text)
        if created:
            return Enqueued(snapshot=await self._stored_form(snapshot), created=True)
        return Enqueued(snapshot=existing, created=False)

    async def _stored_form(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        stored = await self.get(snapshot.task_id)
        return snapshot if stored is None else stored

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
    ) -> list[TaskSnapshot]:
        check_claim(owner, serves, buckets, limit, exclude_tags)
        plain = {name: list(versions) for name, versions in serves.items()}
        chosen = None if buckets is None else sorted(buckets)
        excluded = check_exclude_tags(exclude_tags)
        claimed: list[TaskSnapshot] = await self._node_op(
            "claim_tasks", owner, plain, chosen, limit, excluded
        )
        return claimed

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        at: datetime,
    ) -> list[ClaimedTask]:
        check_claim(owner, serves, buckets, limit, exclude_tags)
        plain = {name: list(versions) for name, versions in serves.items()}
        chosen = None if buckets is None else sorted(buckets)
        excluded = check_exclude_tags(exclude_tags)
        claimed: list[ClaimedTask] = await self._node_op(
            "claim_tasks", owner, plain, chosen, limit, excluded, r.to_micros(at, "at")
        )
        return claimed

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        released: bool = await self._node_op("release_claim", task_id, owner, expect_version)
        return released

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        if not task_ids:
            return {}
        rows = await self._read(SELECT_CARRIERS, (r.dump(sorted(set(task_ids))),))
        return {row[0]: carrier for row in rows if (carrier := decode_trace_carrier(row[1]))}

    # -- counts ----------------------------------------------------------------

    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        sql = _COUNTS
        if active_only:
            sql += f" WHERE status IN ({_ACTIVE})"
        counts = [
            TaskCount(status=STATUS_OF[row[0]], bucket=row[1], owner=row[2], count=row[3])
            for row in await self._read(sql + _COUNTS_GROUP)
        ]
        counts.sort(key=count_key)
        return counts

    # -- the write-through fast path --------------------------------------------

    async def apply_writes(self, writes: Sequence[StateWrite]) -> list[WriteResult]:
        """The whole batch in one transaction of the group-commit writer.

        Every write is encoded and checked first (a :class:`PayloadError`
        raises before anything is queued; a trusted write is encoded, not
        checked again: see :attr:`StateWrite.trusted`). Each write still gets its own
        outcome: the batch plan decides conflicts, duplicates and missing
        tasks per write against the stored versions, so a loser never fails
        its neighbours. Busy, full or unavailable rolls the whole transaction
        back: every write is then ``FAILED`` (not written). A write whose
        outcome is unknown (the store closed while it was in flight) is
        re-read; a re-sent write already stored is ``WRITTEN``.
        """
        if not writes:
            if self._closed:
                raise StoreClosed(repr(self))
            return []
        ops: list[WriteOp] = []
        for write in writes:
            if write.expect_version is None:
                ops.append(self._create_op(write.snapshot, write.transitions, write.trusted))
            else:
                ops.append(
                    self._save_op(
                        write.snapshot, write.expect_version, write.transitions, write.trusted
                    )
                )
        if self._writer is None:
            await self.open()
        writer = self._writer
        if writer is None or self._closed:
            raise StoreClosed(repr(self))
        writer.submit_group(ops, next(_groups))
        results: list[WriteResult] = []
        for write, op in zip(writes, ops, strict=True):
            results.append(await self._outcome(write, op))
        return results

    async def _outcome(self, write: StateWrite, op: WriteOp) -> WriteResult:
        snapshot = write.snapshot
        try:
            await op.future
        except VersionConflict as conflict:
            self._identities.forget(snapshot.task_id)
            return await self._resent(write, conflict.actual, _CONFLICT)
        except DuplicateTaskId:
            self._identities.forget(snapshot.task_id)
            return await self._resent(write, snapshot.status_version, _DUPLICATE)
        except TaskNotFound:
            self._identities.forget(snapshot.task_id)
            return _NOT_FOUND
        except StoreError as error:
            self._identities.forget(snapshot.task_id)
            if type(error) is StoreError and self._closed:
                raise StoreClosed(repr(self)) from None  # in flight at close: cannot re-read
            return WriteResult(outcome=WriteOutcome.FAILED, error=error)
        except BaseException:
            self._identities.forget(snapshot.task_id)
            raise
        self._identities.remember(snapshot, write.expect_version)
        return _WRITTEN


_WRITTEN = WRITTEN
_CONFLICT = WriteResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = WriteResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = WriteResult(outcome=WriteOutcome.NOT_FOUND)


async def _close_all(connections: Iterable[SqliteConnection]) -> None:
    for conn in dict.fromkeys(connections):
        try:
            await conn.close()
        except sqlite3.Error:
            pass  # closing is all that is left to do with it


def _prepare(conn: sqlite3.Connection, where: str, memory: bool, synchronous: str) -> None:
    """Refuse a newer schema, switch to WAL (blocking: on the connection's thread).

    ``PRAGMA journal_mode`` only takes a lock when it changes the mode, so a
    file already in WAL opens without waiting for another process's write.
    """
    refuse_newer(read_version(conn), where)
    if not memory:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        if mode != "wal":
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode != "wal":
            raise StoreUnavailable(f"{where}: cannot switch to WAL (journal_mode is {mode!r})")
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
