"""One background loop of a component: started once, cancelled and awaited on close.

Why one helper: every loop a component starts (lease renewal, command polling,
claims, pruning, progress, reconcile, schedules, the outbox relay) is owned by
that component, and its close must cancel the loop, wait until it has ended,
keep the closer's own cancellation, and say what the loop died of if it died.
Written once per component, ``try: await task except CancelledError: pass``
swallowed the closer's own cancellation: a cancelled ``aclose()`` returned as
if nobody had cancelled it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["BackgroundTask", "cancel_and_join"]

_log = logging.getLogger("chongming.background")


class BackgroundTask:
    """A named loop a component starts once and stops on close."""

    __slots__ = ("_task", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Started and not stopped (it may have ended on its own meanwhile)."""
        return self._task is not None

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    def start(self, loop_body: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Start ``loop_body()`` unless this already runs; True if this call started it."""
        if self._task is not None:
            return False
        self._task = asyncio.get_running_loop().create_task(loop_body(), name=self.name)
        return True

    async def stop(self) -> BaseException | None:
        """Cancel the loop and wait until it has ended; see :func:`cancel_and_join`.

        A loop that had died of an error is logged here (and its error returned):
        its owner's close goes on.
        """
        task, self._task = self._task, None
        if task is None:
            return None
        error = await cancel_and_join(task)
        if error is not None:
            _log.error("%s had stopped on an error: %r", self.name, error)
        return error


async def cancel_and_join(task: asyncio.Future[Any]) -> BaseException | None:
    """Cancel ``task``, wait until it has ended, and return what it died of.

    ``None`` when it ended cancelled or returned. A cancellation of the caller
    while it waits is held until the task has ended, then raised: the task is
    never left running behind an owner that thinks it closed.
    """
    task.cancel()
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    if task.cancelled():
        return None
    return task.exception()
