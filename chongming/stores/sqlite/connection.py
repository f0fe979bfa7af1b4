"""One sqlite3 connection on its own thread; each call is one hop from the loop.

Why not aiosqlite: the group-commit writer runs a whole transaction (BEGIN,
a few ``executemany``, COMMIT, the plan in between) as one function on the
connection's thread. With one hop per statement, each hop back had to wait
for the loop, which was busy encoding the next batch, and the writer spent
half its time waiting. A whole batch per hop keeps the loop and SQLite busy
at the same time.

The thread is a daemon: a store that is never closed must not keep the
interpreter from exiting (whatever it was writing then has an unknown
outcome, as after a kill). Closing is still the contract: ``close()``
finishes queued calls, closes the connection and ends the thread.

Cancellation: cancelling an awaited call does not stop it; it still runs
(and may commit) on the thread, and its result is dropped.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["THREAD_PREFIX", "SqliteConnection"]

T = TypeVar("T")
THREAD_PREFIX = "chongming-sqlite"

_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any] | None]
_STOP = None


class SqliteConnection:
    """A sqlite3 connection owned by one daemon thread (see the module docstring)."""

    def __init__(self, path: str, *, busy_timeout: float, label: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=_serve,
            args=(self._calls, path, busy_timeout),
            name=f"{THREAD_PREFIX} {label}",
            daemon=True,
        )
        self._stopped = False

    @classmethod
    async def open(cls, path: str, *, busy_timeout: float, label: str) -> SqliteConnection:
        """Start the thread and connect; raises ``sqlite3.Error`` when SQLite cannot open."""
        connection = cls(path, busy_timeout=busy_timeout, label=label)
        connection._thread.start()
        try:
            await connection.run(_check_open)
        except BaseException:
            connection.stop()
            raise
        return connection

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(sqlite3_connection, *args)`` on the connection's thread."""
        if self._stopped:
            raise sqlite3.ProgrammingError("the connection is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._calls.put((function, args, future))
        return await future

    async def fetchall(self, sql: str, params: Any = ()) -> list[Any]:
        return await self.run(_fetchall, sql, params)

    async def execute(self, sql: str, params: Any = ()) -> int:
        """Run one statement; returns its ``rowcount``."""
        return await self.run(_execute, sql, params)

    async def close(self) -> None:
        """Finish the queued calls, close the connection, end the thread."""
        if self._stopped:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stopped = True
        self._calls.put((_close, (), future))
        self._calls.put(_STOP)
        await future

    def stop(self) -> None:
        """Close without waiting (from cancellation, ``__del__`` or another thread)."""
        if self._stopped:
            return
        self._stopped = True
        self._calls.put((_close, (), None))
        self._calls.put(_STOP)

    def __del__(self) -> None:
        self.stop()


def _serve(calls: queue.SimpleQueue[_Call | None], path: str, busy_timeout: float) -> None:
    conn: sqlite3.Connection | None = None
    error: BaseException | None = None
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout)
    except BaseException as failure:  # reported to every call (the first is the open check)
        error = failure
    while (call := calls.get()) is not _STOP:
        function, args, future = call
        try:
            if conn is None:
                if function is _close:
                    result = None
                else:
                    assert error is not None
                    raise error
            else:
                result = function(conn, *args)
        except BaseException as failure:
            _reply(future, None, failure)
        else:
            _reply(future, result, None)


def _reply(future: asyncio.Future[Any] | None, result: Any, error: BaseException | None) -> None:
    if future is None:
        return
    try:
        future.get_loop().call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # the loop is closed: nobody is waiting any more
        pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _check_open(conn: sqlite3.Connection) -> None:
    conn.execute("SELECT 1").fetchall()  # fails here for a file that is not a database


def _fetchall(conn: sqlite3.Connection, sql: str, params: Any) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _execute(conn: sqlite3.Connection, sql: str, params: Any) -> int:
    return conn.execute(sql, params).rowcount


def _close(conn: sqlite3.Connection) -> None:
    conn.close()
