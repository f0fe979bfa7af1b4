"""The worker's loop handler drops asyncpg's unread SSL-probe future and nothing else."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from chongming.cli.asyncpg_noise import is_cancelled_connect_noise, quiet_cancelled_connects


def unread(error: BaseException) -> dict[str, Any]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    future.exception()  # read here, so the test itself leaves nothing unread
    return {"message": "Future exception was never retrieved", "exception": error, "future": future}


async def test_only_the_exact_complaint_is_recognised() -> None:
    assert is_cancelled_connect_noise(unread(ConnectionError("unexpected connection_lost() call")))
    assert not is_cancelled_connect_noise(unread(ConnectionError("connection refused")))
    assert not is_cancelled_connect_noise(unread(OSError("unexpected connection_lost() call")))
    other = unread(ConnectionError("unexpected connection_lost() call"))
    other["message"] = "Task exception was never retrieved"
    assert not is_cancelled_connect_noise(other)


async def test_the_handler_sends_the_complaint_to_debug_and_passes_the_rest_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        quiet_cancelled_connects(loop)
        with caplog.at_level(logging.DEBUG, logger="chongming.worker"):
            loop.call_exception_handler(
                unread(ConnectionError("unexpected connection_lost() call"))
            )
            real = unread(ConnectionError("the server went away"))
            loop.call_exception_handler(real)
        assert seen == [real]
        assert any("asyncpg#1211" in record.message for record in caplog.records)
    finally:
        loop.set_exception_handler(None)
