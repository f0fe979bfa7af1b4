"""A component's background loop is cancelled and awaited on close, and the closer's
own cancellation is kept (``chongming/background.py``).

Before, eight components closed their loop with ``try: await task except
CancelledError: pass`` (or ``contextlib.suppress`` of it): a cancelled
``aclose()`` returned as if nobody had cancelled it (the progress-writer test
below failed on that code).
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from chongming.background import BackgroundTask, cancel_and_join
from chongming.plane.progress import ProgressWriter
from chongming.stores import InMemoryTaskStore


async def test_start_is_idempotent_and_stop_ends_the_loop() -> None:
    started = 0
    ended = asyncio.Event()

    async def loop_body() -> None:
        nonlocal started
        started += 1
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    loop = BackgroundTask("test:loop")
    assert loop.start(loop_body) is True
    assert loop.start(loop_body) is False
    await asyncio.sleep(0)
    assert loop.running
    assert started == 1
    assert await loop.stop() is None
    assert ended.is_set()
    assert not loop.running
    assert await loop.stop() is None  # a second stop is a no-op


async def test_a_loop_that_died_is_logged_and_its_error_returned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def loop_body() -> None:
        raise RuntimeError("the store went away")

    loop = BackgroundTask("test:dies")
    loop.start(loop_body)
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="chongming.background"):
        error = await loop.stop()
    assert isinstance(error, RuntimeError)
    assert "test:dies had stopped on an error" in caplog.text


async def test_a_cancelled_closer_waits_for_the_loop_to_end_then_raises() -> None:
    """A loop slow to end on its cancellation is awaited to its end before the closer's
    own cancellation is raised: it is never left running behind its owner."""
    release = asyncio.Event()
    ended = asyncio.Event()

    async def slow_to_end() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.shield(release.wait())  # its cleanup takes a while
            ended.set()

    loop = BackgroundTask("test:slow")
    loop.start(slow_to_end)
    await asyncio.sleep(0)
    closing = asyncio.create_task(loop.stop())
    await asyncio.sleep(0.01)
    closing.cancel()
    await asyncio.sleep(0.01)
    assert not closing.done()  # still waiting for the loop, the cancellation held
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert ended.is_set()


async def test_cancel_and_join_of_a_finished_future_returns_its_error() -> None:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(ValueError("no"))
    assert isinstance(await cancel_and_join(future), ValueError)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    assert await cancel_and_join(done) is None


async def test_a_cancelled_component_close_is_not_swallowed() -> None:
    """The regression: ProgressWriter.aclose cancelled while its loop ends must raise."""
    store = InMemoryTaskStore()
    await store.open()
    writer = ProgressWriter(store, list, interval=3600)
    writer.start()
    await asyncio.sleep(0)
    closing = asyncio.create_task(writer.aclose())
    await asyncio.sleep(0)  # the close now awaits the cancelled loop
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert closing.cancelled()
    await store.close()
