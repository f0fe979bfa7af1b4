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
import os
import sqlite3
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from chongming.errors import ConfigurationError, StoreClosed, StoreUnavailable
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit
from chongming.stores.base import TaskStore
from chongming.stores.identity import IdentityCache
from chongming.stores.sqlite.activity import ActivityOnSqlite
from chongming.stores.sqlite.batch import CommandOp, WriteOp
from chongming.stores.sqlite.commands import ClaimLook, CommandsOnSqlite
from chongming.stores.sqlite.connection import SqliteConnection
from chongming.stores.sqlite.core import CoreOnSqlite
from chongming.stores.sqlite.durable import DurableOnSqlite
from chongming.stores.sqlite.errors import translate
from chongming.stores.sqlite.files import prepare_database_file
from chongming.stores.sqlite.journal import JournalOnSqlite
from chongming.stores.sqlite.limits import ClusterLimitsOnSqlite
from chongming.stores.sqlite.queue import QueueOnSqlite
from chongming.stores.sqlite.rates import RateLimitsOnSqlite
from chongming.stores.sqlite.retention import RetentionOnSqlite
from chongming.stores.sqlite.schedules import SchedulesOnSqlite
from chongming.stores.sqlite.schema import migrate, read_version, refuse_newer
from chongming.stores.sqlite.search import SearchOnSqlite
from chongming.stores.sqlite.writer import Writer

__all__ = ["SqliteTaskStore"]


class SqliteTaskStore(
    CoreOnSqlite,
    CommandsOnSqlite,
    QueueOnSqlite,
    ClusterLimitsOnSqlite,
    RateLimitsOnSqlite,
    DurableOnSqlite,
    RetentionOnSqlite,
    SchedulesOnSqlite,
    ActivityOnSqlite,
    SearchOnSqlite,
    JournalOnSqlite,
    TaskStore,
):
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

        One module per capability of the port (``sqlite/core.py``, ``commands.py``,
        ``queue.py``, ``limits.py``, ``durable.py``); this class owns the
        connections, the group-commit writer and the store clock they share.
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
        self._looks: dict[str, ClaimLook] = {}
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

    async def _guarded_now(self) -> int:
        """The store clock for a read: the local guard raised to the stored high-water."""
        rows = await self._read("SELECT high_water FROM store_clock WHERE id = 1")
        high = max((int(row[0]) for row in rows), default=0)
        return max(self._now_micros(), high)

    def _wake_hint_waiters(self) -> None:
        if self._hint is not None:
            self._hint.set()
            self._hint = None

    async def _node_op(self, action: str, *params: Any) -> Any:
        future = self._future()
        return await self._write(CommandOp(future=future, action=action, params=params))


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
