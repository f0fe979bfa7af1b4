"""Enqueue inside the caller's own SQLite transaction, on the caller's connection.

The store's writer cannot join another connection's transaction, so the rows
an enqueue writes (the task, its first transition, its idempotency key, its
trace carrier) go
through the caller's connection, under a ``SAVEPOINT``: they commit or roll
back with the caller's transaction, and a refusal (an idempotency conflict, a
duplicate id) undoes only its own statements, leaving the transaction usable.

Only an :class:`aiosqlite.Connection` is taken. A ``sqlite3.Connection``
belongs to the thread that made it: its statements would run on the event
loop and block it, and no other thread may touch it.

SQLite has one writer at a time. From its first write (the enqueue, or the
caller's own insert before it) the caller's transaction holds the write lock,
and every other writer — this store's own, and every worker's claim — waits
for it to end, up to its busy timeout. Such transactions must stay short.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import weakref
from collections.abc import Sequence
from typing import Any

import aiosqlite
import anyio

from chongming.errors import (
    ConfigurationError,
    DuplicateTaskId,
    IdempotencyConflict,
    StoreBusy,
    StoreError,
)
from chongming.stores.queue import Enqueued
from chongming.stores.sqlite.batch import INSERT_TASK, INSERT_TRANSITION
from chongming.stores.sqlite.errors import translate
from chongming.stores.sqlite.queue import INSERT_CARRIER
from chongming.stores.sqlite.rows import TASK_NAMES, snapshot_from_row

__all__ = ["enqueue_in_transaction"]

_SAVEPOINT = "chongming_enqueue"
_KEY = "SELECT task_id, digest FROM idempotency_keys WHERE idempotency_key = ?"
_DROP_KEY = "DELETE FROM idempotency_keys WHERE idempotency_key = ?"
_INSERT_KEY = "INSERT INTO idempotency_keys (idempotency_key, task_id, digest) VALUES (?, ?, ?)"
_GET = f"SELECT {', '.join(TASK_NAMES)} FROM tasks WHERE task_id = ?"
_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (primary codes)


async def enqueue_in_transaction(
    connection: object,
    store_path: str,
    row: Sequence[Any],
    transitions: Sequence[Sequence[Any]],
    task_id: str,
    key: str | None,
    digest: str,
    carrier: str | None = None,
) -> Enqueued:
    """Write the enqueue in the caller's open transaction on the store's file.

    Refused with :class:`ConfigurationError`, nothing written: not an
    aiosqlite connection, closed, not inside a transaction, or open on
    another database than ``store_path``. Cancellation: the statements run to
    their end first (all or none of them are in the caller's transaction,
    never part), then the cancellation is re-raised; roll back to be sure.
    """
    conn = await _checked(connection, store_path)
    work = asyncio.ensure_future(_enqueue(conn, row, transitions, task_id, key, digest, carrier))
    cancelled = False
    with anyio.CancelScope(shield=True):  # anyio re-delivers a cancellation at every await
        while not work.done():
            try:
                await asyncio.wait([work])
            except asyncio.CancelledError:
                cancelled = True
    if cancelled:
        if not work.cancelled():
            work.exception()  # retrieved: the caller learns of the cancellation instead
        raise asyncio.CancelledError
    return work.result()


#: Connections already found open on a store's file (by path): the check reads once.
_ON_FILE: weakref.WeakKeyDictionary[aiosqlite.Connection, str] = weakref.WeakKeyDictionary()


async def _checked(connection: object, store_path: str) -> aiosqlite.Connection:
    if isinstance(connection, sqlite3.Connection):
        raise ConfigurationError(
            "connection= takes an aiosqlite.Connection on the SQLite store, not a "
            "sqlite3.Connection: its statements would block the event loop (open the "
            "connection with aiosqlite.connect)"
        )
    if not isinstance(connection, aiosqlite.Connection):
        raise ConfigurationError(
            "connection= takes an aiosqlite connection on the SQLite store, "
            f"got {type(connection).__name__}"
        )
    try:
        in_transaction = connection.in_transaction
        text_factory = connection.text_factory
    except (ValueError, sqlite3.ProgrammingError):  # aiosqlite: no active connection
        raise ConfigurationError("connection= is closed") from None
    if not in_transaction:
        raise ConfigurationError(
            "connection= is not inside a transaction: begin one (await conn.execute("
            '"BEGIN IMMEDIATE")) so the task exists only if it commits'
        )
    if text_factory is not str:
        raise ConfigurationError("connection= must read text as str (its text_factory is not str)")
    if _ON_FILE.get(connection) != store_path:
        main = await _main_file(connection)
        if not main or not _same_file(main, store_path):
            raise ConfigurationError(
                f"connection= is open on {main or 'a database in memory'!r}, not on the "
                f"store's file {store_path!r}: one transaction covers one database"
            )
        _ON_FILE[connection] = store_path
    return connection


async def _main_file(connection: aiosqlite.Connection) -> str:
    """The file of the connection's ``main`` database ('' in memory or temporary)."""
    try:
        async with connection.cursor() as cursor:
            cursor.row_factory = None
            await cursor.execute("PRAGMA database_list")
            found = list(await cursor.fetchall())
    except (ValueError, sqlite3.ProgrammingError):
        raise ConfigurationError("connection= is closed") from None
    except sqlite3.Error as error:
        raise _translated(error, "reading the caller's connection") from None
    return next((str(entry[2] or "") for entry in found if entry[1] == "main"), "")


def _same_file(path: str, store_path: str) -> bool:
    if store_path == ":memory:":
        return False
    try:
        return os.path.samefile(path, store_path)
    except OSError:
        return os.path.realpath(path) == os.path.realpath(store_path)


async def _enqueue(
    conn: aiosqlite.Connection,
    row: Sequence[Any],
    transitions: Sequence[Sequence[Any]],
    task_id: str,
    key: str | None,
    digest: str,
    carrier: str | None,
) -> Enqueued:
    """The statements of one enqueue; the savepoint is released, or rolled back on any error."""
    where = f"enqueueing task {task_id!r} in the caller's transaction"
    try:
        async with conn.cursor() as cursor:
            cursor.row_factory = None  # whatever the caller's connection uses, rows are tuples
            await cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                result = await _statements(cursor, row, transitions, task_id, key, digest, carrier)
            except BaseException:
                await _undo(cursor)
                raise
            await cursor.execute(f"RELEASE {_SAVEPOINT}")
            return result
    except (ValueError, sqlite3.ProgrammingError):
        raise ConfigurationError("connection= was closed during the enqueue") from None
    except sqlite3.Error as error:
        raise _translated(error, where) from None


def _translated(error: sqlite3.Error, where: str) -> StoreError:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _BUSY:
        return StoreBusy(
            f"{where}: the database is locked by another connection ({error}); nothing "
            "was written. Begin the transaction with BEGIN IMMEDIATE: it waits for the "
            "lock at its start instead of failing midway"
        )
    return translate(error, where=where, busy_timeout=0)


async def _statements(
    cursor: aiosqlite.Cursor,
    row: Sequence[Any],
    transitions: Sequence[Sequence[Any]],
    task_id: str,
    key: str | None,
    digest: str,
    carrier: str | None,
) -> Enqueued:
    if key is not None:
        await cursor.execute(_KEY, (key,))
        found = await cursor.fetchone()
        if found is not None:
            if found[1] != digest:
                raise IdempotencyConflict(key, found[0])
            await cursor.execute(_GET, (found[0],))
            existing = await cursor.fetchone()
            if existing is not None:
                return Enqueued(snapshot=snapshot_from_row(existing), created=False)
            await cursor.execute(_DROP_KEY, (key,))  # its task is gone: the key is free
    try:
        await cursor.execute(INSERT_TASK, row)
    except sqlite3.IntegrityError:
        raise DuplicateTaskId(task_id) from None
    await cursor.executemany(INSERT_TRANSITION, transitions)
    if key is not None:
        await cursor.execute(_INSERT_KEY, (key, task_id, digest))
    if carrier is not None:
        await cursor.execute(INSERT_CARRIER, (task_id, carrier))
    return Enqueued(snapshot=snapshot_from_row(row), created=True)  # the row as written


async def _undo(cursor: aiosqlite.Cursor) -> None:
    """Back to before the enqueue; the caller's own statements stay."""
    try:
        await cursor.execute(f"ROLLBACK TO {_SAVEPOINT}")
        await cursor.execute(f"RELEASE {_SAVEPOINT}")
    except (ValueError, sqlite3.Error):
        pass  # closed, or SQLite rolled the whole transaction back itself: nothing of ours is left
