"""The command listener's connect outlives a wait shorter than it (found by the DBOS bench).

Callers wait for a hint in slices of their poll interval
(``asyncio.wait_for(store.wait_command_hint(), poll_interval)``). When a
slice was shorter than a PostgreSQL connect, each one cancelled the connect
in its handshake and the next slice began another: a new connection per
poll, and asyncpg's "Future exception was never retrieved" for each. The
connect now runs in the listener's own task; a wait that times out leaves
it running, and the next wait takes it up.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chongming.stores.postgres.listener import CommandListener


class _Connection:
    def __init__(self) -> None:
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed

    def add_termination_listener(self, callback: Any) -> None:
        pass

    def remove_termination_listener(self, callback: Any) -> None:
        pass

    async def add_listener(self, channel: str, callback: Any) -> None:
        pass

    async def remove_listener(self, channel: str, callback: Any) -> None:
        pass


async def test_a_wait_shorter_than_the_connect_does_not_cancel_it() -> None:
    started: list[_Connection] = []
    closed: list[_Connection] = []
    gate = asyncio.Event()

    async def connect() -> _Connection:
        started.append(conn := _Connection())
        await gate.wait()  # a slow handshake
        return conn

    async def disconnect(conn: Any) -> None:
        conn.closed = True
        closed.append(conn)

    listener = CommandListener(connect, disconnect, "chan", probe_interval=30)
    for _ in range(5):  # five poll slices, each shorter than the connect
        try:
            await asyncio.wait_for(listener.wait(), 0.01)
        except TimeoutError:
            pass
    assert len(started) == 1  # one connect, taken up by every slice
    gate.set()
    await asyncio.wait_for(listener.wait(), 5)  # the connect completes: listening now
    assert listener.connection is started[0]
    await listener.close()
    assert closed == started


async def test_close_during_a_connect_cancels_it_and_leaves_nothing_open() -> None:
    gate = asyncio.Event()
    opened: list[_Connection] = []

    async def connect() -> _Connection:
        await gate.wait()
        opened.append(conn := _Connection())
        return conn

    async def disconnect(conn: Any) -> None:
        conn.closed = True

    listener = CommandListener(connect, disconnect, "chan", probe_interval=30)
    try:
        await asyncio.wait_for(listener.wait(), 0.01)
    except TimeoutError:
        pass
    await listener.close()  # the connect task is cancelled and awaited: no task left
    assert opened == []
    assert listener.connection is None
