"""Sync task functions in worker threads.

Stop semantics: a thread cannot be killed. A stop request makes the next
``ctx.checkpoint()`` raise :class:`TaskCancelled`; if the thread has not ended
when the grace window runs out, the runtime abandons it and records ``lost``
(the thread may still be producing side effects — the runtime will not claim
it stopped). Threads share memory, so closures, pools and loaded models can
be used freely and nothing needs to be picklable.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chongming.errors import ConfigurationError, ExecutorClosed, NeverStarted
from chongming.executors.base import Executor, StopSemantics, call_guarded
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import CarrierKind

if TYPE_CHECKING:
    import anyio

__all__ = ["ThreadExecutor"]


class ThreadExecutor(Executor):
    """Worker threads bounded by an anyio capacity limiter (``max_workers``).

    ``aclose()`` refuses new calls and waits until every call still awaited
    through this executor has returned; a call whose caller gave up on it
    (an abandoned thread, recorded ``lost``) is not waited for.
    """

    carrier = CarrierKind.THREAD
    stop_semantics = StopSemantics.ABANDON

    def __init__(self, max_workers: int = 40) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigurationError(f"max_workers must be an int >= 1, got {max_workers!r}")
        self.max_workers = max_workers
        # One limiter per event loop: an executor may outlive a loop (a module
        # level default, a test suite), and a limiter's waiters belong to one.
        self._limiters: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, anyio.CapacityLimiter
        ] = weakref.WeakKeyDictionary()
        #: The last loop asked about and its limiter: one loop per thread is the rule,
        #: and a weak dictionary's lookup is a Python call on every thread call.
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], anyio.CapacityLimiter] | None = (
            None
        )
        self._in_flight = 0
        self._drained: asyncio.Event | None = None
        self._closed = False

    @property
    def in_flight(self) -> int:
        """Calls awaited through this executor right now."""
        return self._in_flight

    async def run(
        self,
        fn: Callable[..., Any],
        context: TaskContext,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        return await self._on_a_thread(functools.partial(_call, fn, context, args, kwargs))

    async def call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """``fn(*args, **kwargs)`` on one of these threads: a durable task's plain step.

        Bounded by the same ``max_workers`` as the sync tasks, and waited for
        by :meth:`aclose` like them. A ``SystemExit`` (or another
        ``BaseException`` of the function's own) comes back as
        :class:`~chongming.executors.base.ThreadBaseException`: it cannot end the loop.
        """
        return await self._on_a_thread(functools.partial(call_guarded, fn, *args, **kwargs))

    async def _on_a_thread(self, work: Callable[[], Any]) -> Any:
        """``work()`` on a worker thread under this loop's limiter, counted as in flight."""
        if self._closed:
            raise ExecutorClosed("the thread executor is closed")
        loop = asyncio.get_running_loop()
        # Imported on use: a controller that runs only coroutines never loads anyio
        # (`from chongming import Controller` stays cheap); once loaded, the statement
        # is a look into sys.modules.
        import anyio.to_thread

        last = self._last
        if last is not None and last[0]() is loop:
            limiter = last[1]
        else:
            found = self._limiters.get(loop)
            if found is None:
                found = self._limiters[loop] = anyio.CapacityLimiter(self.max_workers)
            limiter = found
            self._last = (weakref.ref(loop), limiter)
        self._in_flight += 1
        try:
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=limiter)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self._drained is not None:
                self._drained.set()

    async def aclose(self) -> None:
        self._closed = True
        if self._in_flight:
            self._drained = asyncio.Event()
            await self._drained.wait()

    def __repr__(self) -> str:
        return f"ThreadExecutor(max_workers={self.max_workers})"


def _call(
    fn: Callable[..., Any], context: TaskContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if not context.enter_carrier():
        raise NeverStarted(f"task {context.task_id!r} was stopped before a worker thread took it")
    return call_guarded(fn, context, *args, **kwargs)  # SystemExit & co. become failures
