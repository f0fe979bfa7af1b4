"""ServedVersions: concurrent enqueues that find the view of the workers stale share one read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chongming.controller.served import ServedVersions


class _Nodes:
    """Just the store's ``nodes``: counts the reads, answers when told to."""

    def __init__(self) -> None:
        self.reads = 0
        self.release = asyncio.Event()
        self.called = asyncio.Event()
        self.fail = False

    async def nodes(self) -> list[Any]:
        self.reads += 1
        self.called.set()
        await self.release.wait()
        if self.fail:
            raise ConnectionError("store away")
        return []


async def test_concurrent_stale_lookups_share_one_read() -> None:
    store = _Nodes()
    served = ServedVersions(store, ttl=60.0)  # type: ignore[arg-type]
    lookups = [asyncio.ensure_future(served.highest("job")) for _ in range(50)]
    await store.called.wait()  # every lookup has looked by now: they were queued first
    assert store.reads == 1
    store.release.set()
    assert await asyncio.gather(*lookups) == [None] * 50
    assert await served.highest("job") is None
    assert store.reads == 1  # fresh now: no read
    await served.aclose()


async def test_a_failed_shared_read_fails_each_waiting_enqueue_and_the_next_reads_again() -> None:
    store = _Nodes()
    store.fail = True
    served = ServedVersions(store, ttl=60.0)  # type: ignore[arg-type]
    lookups = [asyncio.ensure_future(served.highest("job")) for _ in range(3)]
    await store.called.wait()
    store.release.set()
    results = await asyncio.gather(*lookups, return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    store.fail = False
    assert await served.highest("job") is None
    assert store.reads == 2
    await served.aclose()


async def test_a_cancelled_waiter_leaves_the_shared_read_to_the_others() -> None:
    store = _Nodes()
    served = ServedVersions(store, ttl=60.0)  # type: ignore[arg-type]
    first = asyncio.ensure_future(served.highest("job"))
    second = asyncio.ensure_future(served.highest("job"))
    await store.called.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    store.release.set()
    assert await second is None
    assert store.reads == 1
    await served.aclose()
