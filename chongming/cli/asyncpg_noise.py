"""asyncpg's one known shutdown complaint, kept out of an operator's error log.

When a task connecting a new pooled connection is cancelled while asyncpg
waits for the server's answer to its SSL request, asyncpg closes the socket
but leaves the answer's future holding ``ConnectionError('unexpected
connection_lost() call')`` that nobody reads (MagicStack/asyncpg#1211, #1310).
asyncio then logs "Future exception was never retrieved" at ERROR level. A
worker stopped while its pool grows (loops acquiring at start-up) hits it
about once in six stops. Nothing leaks: the socket is already closed. The
worker, which owns its event loop, installs this handler so the line goes
to DEBUG; everything else reaches the loop's default handler unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["is_cancelled_connect_noise", "quiet_cancelled_connects"]

log = logging.getLogger("chongming.worker")

_MESSAGE = "unexpected connection_lost() call"


def is_cancelled_connect_noise(context: dict[str, Any]) -> bool:
    """Whether a loop error is exactly asyncpg's unread SSL-probe future."""
    error = context.get("exception")
    return (
        type(error) is ConnectionError
        and str(error) == _MESSAGE
        and isinstance(context.get("future"), asyncio.Future)
        and str(context.get("message", "")).startswith("Future exception was never retrieved")
    )


def quiet_cancelled_connects(loop: asyncio.AbstractEventLoop) -> None:
    """Send asyncpg's cancelled-connect complaint to DEBUG on ``loop``; all else as before."""
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if is_cancelled_connect_noise(context):
            log.debug("a cancelled connect left an unread SSL-probe future (asyncpg#1211)")
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
