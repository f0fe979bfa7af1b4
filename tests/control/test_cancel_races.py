"""A cancellation that arrives as the awaited thing ends is still delivered.

On Python 3.11 ``asyncio.wait_for`` returns the inner result when the inner
awaitable finishes in the same loop step as the cancel, and the cancel is
gone. The command poller waited for its hint that way, so a worker told to
stop at the moment a hint arrived polled on forever and never exited on
SIGTERM. Each test here makes that step happen on purpose: the hint fires
and the cancel lands before either side runs again.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from chongming.plane.commands import CommandPoller
from chongming.stores.base import TaskStore
from chongming.stores.postgres.listener import CommandListener


class HintedStore:
    """Just what the poller calls: no commands, and a hint the test fires."""

    def __init__(self) -> None:
        self.hint = asyncio.Event()
        self.waiting = asyncio.Event()
        self.polls = 0

    async def claim_commands(self, owner: str, *, lease_seconds: float, limit: int) -> list[Any]:
        self.polls += 1
        return []

    async def wait_command_hint(self) -> None:
        self.waiting.set()
        await self.hint.wait()
        self.hint.clear()  # one hint, one wake-up


async def test_closing_the_poller_as_a_hint_arrives_ends_it() -> None:
    store = HintedStore()

    async def apply(command: Any) -> str | None:
        return None

    poller = CommandPoller(
        cast(TaskStore, store), owner="n1", apply=apply, poll_interval=30.0, lease_seconds=5.0
    )
    poller.start()
    async with asyncio.timeout(5):
        await store.waiting.wait()
    # The close runs first and cancels the poller; the hint fires in the same
    # step, so the hint's waiter ends before the poller sees its cancel.
    closing = asyncio.ensure_future(poller.aclose(timeout=1.0))
    store.hint.set()
    done, _ = await asyncio.wait([closing], timeout=5.0)
    assert closing in done, f"the poller ignored its cancel and polled {store.polls} times"
    closing.result()
    assert not poller.running


class Connection:
    """Enough of an asyncpg connection for the listener to hold one."""

    def is_closed(self) -> bool:
        return False

    def add_termination_listener(self, callback: Any) -> None:
        pass

    def remove_termination_listener(self, callback: Any) -> None:
        pass

    async def add_listener(self, channel: str, callback: Any) -> None:
        pass

    async def remove_listener(self, channel: str, callback: Any) -> None:
        pass


async def test_a_listener_wait_cancelled_as_a_notification_arrives_is_cancelled() -> None:
    async def connect() -> Connection:
        return Connection()

    async def disconnect(conn: Any) -> None:
        pass

    listener = CommandListener(connect, disconnect, "chan", probe_interval=30.0)
    await listener.wait()  # the first wait connects and returns at once
    waiter = asyncio.ensure_future(listener.wait())
    for _ in range(10):  # let it reach its wait on the wakeup
        await asyncio.sleep(0)
    assert not waiter.done()
    listener._on_notify(None, 1, "chan", "")  # the notification wakes it ...
    waiter.cancel()  # ... and the cancel lands in the same step
    done, _ = await asyncio.wait([waiter], timeout=5.0)
    assert waiter in done
    assert waiter.cancelled(), "the wait returned as if nothing had cancelled it"
    await listener.close()
