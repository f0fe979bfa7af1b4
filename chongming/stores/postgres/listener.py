"""The dedicated LISTEN connection behind ``wait_command_hint``.

Notifications are hints (docs/reliability.md, P7): they only shorten the wait before
the next poll. A LISTEN session that the server terminated goes silent, so the
listener treats every way of losing it (termination callback, a failed
liveness probe) as "something may have been missed": it reconnects and
returns, and the caller polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["CommandListener"]

log = logging.getLogger("chongming.stores.postgres")


class CommandListener:
    """One LISTEN connection, opened on the first wait and kept until ``close``."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        disconnect: Callable[[Any], Awaitable[None]],
        channel: str,
        *,
        probe_interval: float,
    ) -> None:
        self._connect = connect
        self._disconnect = disconnect
        self._channel = channel
        self._probe_interval = probe_interval
        self._conn: Any = None
        self._pending = False
        self._wakeup = asyncio.Event()
        self._lock = asyncio.Lock()
        self._closed = False
        self._connecting: asyncio.Task[None] | None = None
        self.reconnects = 0

    @property
    def connection(self) -> Any:
        return self._conn

    @property
    def channel(self) -> str:
        return self._channel

    async def wait(self) -> None:
        """Return on a notification, or once the listener was (re)connected.

        Cancellation: safe at any point. A connect in progress is not
        cancelled with the wait (callers wait in slices of their poll
        interval, which may be shorter than a connect): it goes on, and the
        next wait takes it up.
        """
        if self._conn is None or self._conn.is_closed():
            # Anything sent while nobody listened was missed: listen, then poll.
            await self._connected()
            self._pending = False
            return
        if self._pending:
            self._pending = False
            return
        wakeup = self._wakeup
        while not wakeup.is_set():
            try:
                async with asyncio.timeout(self._probe_interval):
                    await wakeup.wait()
            except TimeoutError:
                if not await self._alive():
                    break
        if self._closed:
            return
        if self._conn is None or self._conn.is_closed() or not wakeup.is_set():
            # Listen again before the caller polls, or the poll could miss a command.
            await self._connected(force=True)
        self._pending = False

    async def _connected(self, *, force: bool = False) -> None:
        """(Re)connect in a task of the listener's own; wait for it without owning it."""
        task = self._connecting
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(
                self._reconnect(force=force), name="chongming-pg-listen-connect"
            )
            task.add_done_callback(_retrieve)
            self._connecting = task
        await asyncio.shield(task)

    async def close(self) -> None:
        self._closed = True
        task, self._connecting = self._connecting, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})  # its outcome is _retrieve's to look at
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._drop(conn)
        self._signal()  # waiters return, and the store tells them it is closed

    async def _drop(self, conn: Any) -> None:
        if not conn.is_closed():
            conn.remove_termination_listener(self._on_terminated)
            try:
                async with asyncio.timeout(2.0):
                    await conn.remove_listener(self._channel, self._on_notify)
            except Exception as error:  # the connection is going away anyway
                log.debug("UNLISTEN failed (%s)", type(error).__name__)
        await self._disconnect(conn)

    async def _reconnect(self, *, force: bool = False) -> None:
        async with self._lock:
            if not force and self._conn is not None and not self._conn.is_closed():
                return
            old, self._conn = self._conn, None
            if old is not None:
                self.reconnects += 1
                await self._drop(old)
            conn = await self._connect()
            try:
                conn.add_termination_listener(self._on_terminated)
                await conn.add_listener(self._channel, self._on_notify)
            except BaseException:
                await self._disconnect(conn)
                raise
            if self._closed:
                await self._disconnect(conn)
                return
            self._conn = conn
            # Listening from now on: the next wait returns at once so its caller
            # polls again (what came before the LISTEN was missed), even if the
            # wait that began this connect gave up on it.
            self._pending = True

    async def _alive(self) -> bool:
        conn = self._conn
        if conn is None or conn.is_closed():
            return False
        try:
            async with asyncio.timeout(self._probe_interval):
                await conn.fetchval("SELECT 1")
        except Exception as error:  # any failure means: reconnect, then poll
            log.info("command listener probe failed (%s); reconnecting", type(error).__name__)
            return False
        return True

    def _on_notify(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self._signal()

    def _on_terminated(self, conn: Any) -> None:
        log.info("command listener connection closed; the next wait reconnects and polls")
        self._signal()

    def _signal(self) -> None:
        self._pending = True
        wakeup, self._wakeup = self._wakeup, asyncio.Event()
        wakeup.set()


def _retrieve(task: asyncio.Task[None]) -> None:
    """A connect nobody waits for any more still has its failure looked at (and logged)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        log.info("command listener connect failed (%s); the next wait tries again", error)
