"""Up to ``max_workers`` worker processes, started on demand and reused between jobs.

A job waits for an idle worker; when none is idle and fewer than
``max_workers`` live, one is started for it. A worker that exits (crashed,
killed by a hard stop, or closed) leaves the pool, and a new one is started
as soon as a job waits. A worker that cannot start fails the job that
waited for it (``launch_error``), one job per failed start, so a broken
interpreter or main module cannot make the pool spawn forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import deque
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import Any

from chongming.errors import ExecutorClosed
from chongming.executors.base import CarrierFailure
from chongming.executors.process.calls import finish_despite_cancellation
from chongming.executors.process.worker_handle import WorkerHandle, WorkerStartFailed, WorkerState
from chongming.state.records import Failure, FailureKind

__all__ = ["PoolStatistics", "WorkerPool"]

#: Seconds an idle worker gets to exit after ``close`` before it is killed.
CLOSE_WAIT = 2.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PoolStatistics:
    """A moment of a :class:`ProcessExecutor`'s pool (``statistics()``)."""

    max_workers: int
    workers: int  # alive: starting, idle or busy
    idle: int
    waiting: int  # calls waiting for a worker
    started: int  # worker processes started so far
    exited: int  # worker processes that ended (crashed, killed or closed)


class WorkerPool:
    """The worker processes of one event loop; see the module docstring."""

    def __init__(
        self,
        context: BaseContext,
        max_workers: int,
        on_message: Callable[[WorkerHandle, list[Any]], None],
        on_exit: Callable[[WorkerHandle], None],
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self._context = context
        self._max = max_workers
        self._on_message = on_message
        self._on_exit = on_exit
        self._workers: set[WorkerHandle] = set()  # not exited
        self._idle: list[WorkerHandle] = []
        self._waiters: deque[asyncio.Future[WorkerHandle]] = deque()
        self._starts: set[asyncio.Task[None]] = set()
        self._closing = False
        self._started = 0
        self._exited = 0

    def statistics(self) -> PoolStatistics:
        return PoolStatistics(
            max_workers=self._max,
            workers=len(self._workers),
            idle=len(self._idle),
            waiting=sum(not waiter.done() for waiter in self._waiters),
            started=self._started,
            exited=self._exited,
        )

    @property
    def workers(self) -> frozenset[WorkerHandle]:
        return frozenset(self._workers)

    # -- taking and giving back ------------------------------------------------------

    async def acquire(self) -> WorkerHandle:
        """An idle worker, started if need be.

        Raises :class:`CarrierFailure` (``launch_error``) when the worker
        started for this call could not start. Cancellation: nothing is held.
        """
        while self._idle:
            worker = self._idle.pop()
            if worker.usable:
                return worker
        if self._closing:
            raise ExecutorClosed("the process executor is closed")
        waiter: asyncio.Future[WorkerHandle] = self.loop.create_future()
        self._waiters.append(waiter)
        self._grow()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release(waiter.result())  # handed to us just as we were cancelled
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self, worker: WorkerHandle) -> None:
        """``worker`` finished a job; the next waiting call gets it."""
        if not worker.usable:
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(worker)
                return
        self._idle.append(worker)

    # -- starting and losing workers ---------------------------------------------------

    def _grow(self) -> None:
        """Start workers for the calls that wait, up to ``max_workers``."""
        if self._closing:
            return
        starting = sum(worker.state is WorkerState.STARTING for worker in self._workers)
        waiting = sum(not waiter.done() for waiter in self._waiters)
        while len(self._workers) < self._max and starting < waiting:
            worker = WorkerHandle(self._context, self._on_message, self._worker_exited)
            self._workers.add(worker)
            task = self.loop.create_task(self._start(worker), name="chongming: worker start")
            self._starts.add(task)
            task.add_done_callback(self._starts.discard)
            starting += 1

    async def _start(self, worker: WorkerHandle) -> None:
        try:
            await worker.start()
        except WorkerStartFailed as error:
            self._workers.discard(worker)
            self._fail_one_waiter(str(error))
            self._grow()
            return
        finally:
            if worker.state is WorkerState.EXITED:
                self._workers.discard(worker)
        self._started += 1
        if self._closing:
            await worker.close(CLOSE_WAIT)
            return
        self.release(worker)

    def _fail_one_waiter(self, reason: str) -> None:
        failure = Failure(kind=FailureKind.LAUNCH_ERROR, message=reason, retryable=False)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(CarrierFailure(failure))
                return

    def _worker_exited(self, worker: WorkerHandle) -> None:
        self._workers.discard(worker)
        if worker in self._idle:
            self._idle.remove(worker)
        self._exited += 1
        self._on_exit(worker)
        if worker.served:
            self._grow()  # a replacement, if a call waits (a failed start is handled in _start)

    # -- closing ---------------------------------------------------------------------

    async def aclose(self) -> None:
        """Idle workers are asked to exit (killed after a short wait); no new one starts.

        Cancellation: whatever is left is killed, then the cancellation is re-raised.
        """
        self._closing = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ExecutorClosed("the process executor is closed"))
        self._waiters.clear()
        try:
            if self._starts:
                await asyncio.wait(set(self._starts))
            closing = [worker.close(CLOSE_WAIT) for worker in list(self._workers)]
            if closing:
                await asyncio.wait([asyncio.ensure_future(close) for close in closing])
        except asyncio.CancelledError:
            await finish_despite_cancellation(self.terminate())
            raise

    async def terminate(self) -> None:
        """End every worker at once, busy or not (the immediate half of closing)."""
        self._closing = True
        for task in list(self._starts):
            task.cancel()
        why = "its executor was terminated"
        ending = [asyncio.ensure_future(worker.end(0.0, why)) for worker in list(self._workers)]
        waiting = ending + list(self._starts)
        if waiting:
            await asyncio.wait(waiting)
