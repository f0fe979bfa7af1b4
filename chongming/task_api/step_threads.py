"""The plain functions an attempt's steps run on worker threads, until each really returns.

A durable task is a coroutine; a plain function it gives ``ctx.step`` (or
``ctx.effect``, or a fact ``check``) runs on a worker thread. Cancelling the
coroutine (a stop after its grace, a timeout, a shutdown) stops waiting for
that thread, not the thread: it cannot be killed and goes on, side effects
and all. The attempt reads :attr:`StepThreads.running` before it records its
end, so it never says ``stopped`` (or lets a retry start the same body) while
one of them still runs: it waits for them, or records ``lost``.

Loop thread only, except :meth:`StepCall.enter` and :meth:`StepCall.leave`,
which the worker thread calls. ``enter`` and :meth:`StepThreads.abandon` are
a two-flag handshake (as in :class:`~chongming.task_api.signals.AttemptSignals`):
either the thread sees the call abandoned and never calls the function, or
the loop sees it started and keeps counting it until it returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["StepCall", "StepThreads"]


class StepCall:
    """One plain function handed to a worker thread."""

    __slots__ = ("_loop", "_threads", "abandoned", "label", "started")

    def __init__(self, threads: StepThreads, label: str, loop: asyncio.AbstractEventLoop) -> None:
        self._threads = threads
        self._loop = loop
        self.label = label
        self.started = False
        self.abandoned = False

    def enter(self) -> bool:
        """Worker thread, right before the function: False means do not call it."""
        self.started = True
        return not self.abandoned

    def leave(self) -> None:
        """Worker thread, after the function (or instead of it): the thread is free."""
        try:
            self._loop.call_soon_threadsafe(self._threads.ended, self)
        except RuntimeError:
            pass  # the loop is closed: nobody is left to wait for this thread


class StepThreads:
    """The step calls of one attempt still running on worker threads."""

    __slots__ = ("_calls", "_idle")

    def __init__(self) -> None:
        self._calls: set[StepCall] = set()
        self._idle: list[Callable[[], None]] = []

    @property
    def running(self) -> list[str]:
        """Labels of the functions still running (or about to run) on a thread."""
        return sorted(call.label for call in self._calls)

    def begin(self, label: str) -> StepCall:
        """A call (``label``: ``step 'fetch'``) is about to be handed to a thread."""
        call = StepCall(self, label, asyncio.get_running_loop())
        self._calls.add(call)
        return call

    def abandon(self, call: StepCall) -> None:
        """Its awaiter gave up (cancelled): forget it now unless its thread began it."""
        call.abandoned = True
        if not call.started:
            self.ended(call)

    def ended(self, call: StepCall) -> None:
        """Loop thread: the call's thread is done with it (idempotent)."""
        if call not in self._calls:
            return
        self._calls.discard(call)
        if not self._calls:
            waiting, self._idle = self._idle, []
            for callback in waiting:
                callback()

    def when_idle(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` on the loop once no call is running (at once if none is)."""
        if not self._calls:
            callback()
        else:
            self._idle.append(callback)

    def forget_waiters(self) -> None:
        self._idle.clear()
