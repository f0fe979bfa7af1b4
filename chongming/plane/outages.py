"""A durable task's store calls wait out an outage of the store instead of failing it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from chongming.errors import StoreUnavailable

__all__ = ["through_outages"]

_T = TypeVar("_T")
_log = logging.getLogger("chongming.control")
#: First and longest pause between tries of a journal call while the store is away.
_OUTAGE_BACKOFF = (0.05, 2.0)


async def through_outages(call: Callable[[], Awaitable[_T]]) -> _T:
    """``call()``, tried again while the store is unreachable, until it answers.

    Every journal call is safe to repeat after an unknown outcome (a step's
    first record wins, an operation done answers its result, a begun one says
    it was resumed), and the write-through waits out the same outage: a
    durable task must not fail, its recorded steps wasted, because the
    database restarted. A takeover meanwhile shows as a stale epoch once the
    store answers; a stop cancels the wait.
    """
    delay, warned = _OUTAGE_BACKOFF[0], False
    while True:
        try:
            return await call()
        except StoreUnavailable as error:
            if not warned:
                _log.warning("the store is unreachable; a durable task waits for it: %s", error)
                warned = True
        await asyncio.sleep(delay)
        delay = min(delay * 2, _OUTAGE_BACKOFF[1])
