"""Sync task functions (and wrapped coroutines) in reusable worker processes.

Stop semantics: ``KILL``. A stop request reaches the child over a pipe and
makes its next ``ctx.checkpoint()`` raise :class:`TaskCancelled`; when the
stop grace window runs out, the worker's whole process group gets
``SIGTERM``, then ``SIGKILL`` after ``grace`` seconds, and the task is
``stopped`` (the history says "terminated after grace" or "killed"). The
per-attempt and idle timeouts end an attempt the same way. A worker that
dies on its own (a segfault, ``os._exit``, the out-of-memory killer) fails
its task with the kind ``crashed`` and is replaced; ``sys.exit()`` in task
code fails the attempt (not retried) and the worker serves on.

The price, checked when a task is submitted: the function must be importable
by name from a module (see :mod:`chongming.executors.process.target`), and
arguments and results must be JSON, which is all that crosses the pipe.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

from chongming.errors import ConfigurationError, ExecutorClosed, NeverStarted
from chongming.executors.base import Executor, StopSemantics
from chongming.executors.process.calls import finish_despite_cancellation
from chongming.executors.process.job import Job, deliver_message, worker_exited
from chongming.executors.process.pool import PoolStatistics, WorkerPool
from chongming.executors.process.target import TargetName, name_target
from chongming.executors.process.worker_handle import WorkerHandle
from chongming.policies.checks import check_count, check_number
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import CarrierKind

__all__ = ["ProcessExecutor"]

_START_METHODS = ("spawn", "forkserver")
_MAX_NAMES = 4096


class ProcessExecutor(Executor):
    """Worker processes: hard stop, crash isolation, no GIL shared with the caller.

    - ``max_workers``: how many worker processes at most (default: the CPUs
      this process may use). Workers start when a task needs one and are
      reused; a worker that dies is replaced.
    - ``start_method``: ``"spawn"`` (a fresh interpreter per worker; the
      default) or ``"forkserver"`` (forked from a clean server process:
      faster to replace). ``"fork"`` is refused: it would copy the event
      loop, its threads and their locks into the child mid-flight.
    - ``grace``: seconds a worker gets to exit after ``SIGTERM`` before its
      process group is killed (the stop grace window, how long a task may
      take to honour a stop request, is the run's ``ControlWindows.stop_grace``).

    Use it as ``async with ProcessExecutor() as processes:`` or call
    :meth:`aclose`: it refuses new calls, waits for the calls still running,
    then closes the idle workers. A controller given this executor does not
    close it; workers nobody closed are killed, with their process groups,
    when the interpreter exits.
    """

    carrier = CarrierKind.PROCESS
    stop_semantics = StopSemantics.KILL

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        start_method: str = "spawn",
        grace: float = 0.5,
    ) -> None:
        if not (hasattr(os, "killpg") and hasattr(os, "setsid")):
            raise ConfigurationError("ProcessExecutor needs POSIX process groups (os.killpg)")
        if max_workers is None:
            max_workers = _usable_cpus()
        self.max_workers = check_count("ProcessExecutor", "max_workers", max_workers, minimum=1)
        if start_method == "fork":
            raise ConfigurationError(
                "ProcessExecutor.start_method 'fork' is refused: a forked child inherits the "
                "parent's event loop, threads and locks in whatever state they are; "
                "use 'spawn' or 'forkserver'"
            )
        if not isinstance(start_method, str) or start_method not in _START_METHODS:
            raise ConfigurationError(
                f"ProcessExecutor.start_method must be 'spawn' or 'forkserver', "
                f"got {start_method!r}"
            )
        if start_method not in multiprocessing.get_all_start_methods():
            raise ConfigurationError(f"start method {start_method!r} is not available here")
        self.start_method = start_method
        self.grace = check_number("ProcessExecutor", "grace", grace)
        if self.grace < 0:
            raise ConfigurationError(f"ProcessExecutor.grace must be >= 0 seconds, got {grace!r}")
        self._context = multiprocessing.get_context(start_method)
        self._names: dict[int, tuple[Callable[..., Any], TargetName]] = {}
        self._pool: WorkerPool | None = None
        self._seq = itertools.count(1)
        self._in_flight = 0
        self._drained: asyncio.Event | None = None
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"ProcessExecutor(max_workers={self.max_workers}, "
            f"start_method={self.start_method!r}, grace={self.grace:g})"
        )

    async def __aenter__(self) -> ProcessExecutor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- the port ----------------------------------------------------------------

    def check_target(self, fn: Callable[..., Any]) -> None:
        """Refuse, with the reason and the fix, a function a worker could not import."""
        self._name_of(fn)

    async def run(
        self,
        fn: Callable[..., Any],
        context: TaskContext,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run ``fn`` in a worker and return its result.

        Cancellation (the grace window ran out, a timeout, the host closes):
        the worker's process group is terminated, then killed; this returns
        (re-raising ``CancelledError``) only once the worker has exited.
        """
        if self._closed:
            raise ExecutorClosed("the process executor is closed")
        name = self._name_of(fn)
        pool = self._pool_for()
        self._in_flight += 1
        try:
            worker = await pool.acquire()
            return await self._run_on(pool, worker, name, context, args, kwargs)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self._drained is not None:
                self._drained.set()

    async def aclose(self) -> None:
        """Refuse new calls, wait for running ones, close the workers. Idempotent.

        Cancellation: every worker is killed at once, then the cancellation
        is re-raised.
        """
        self._closed = True
        pool = self._pool_of_this_loop()
        try:
            if self._in_flight:
                self._drained = asyncio.Event()
                await self._drained.wait()
            if pool is not None:
                await pool.aclose()
        except asyncio.CancelledError:
            if pool is not None:
                await finish_despite_cancellation(pool.terminate())
            raise

    async def terminate(self) -> None:
        """The immediate half of closing: refuse new calls and kill every worker now.

        A task still running on one ends ``failed`` (``crashed``, saying that
        its executor was terminated).
        """
        self._closed = True
        pool = self._pool_of_this_loop()
        if pool is not None:
            await finish_despite_cancellation(pool.terminate())

    def statistics(self) -> PoolStatistics:
        """Workers alive, idle, started and exited so far (all zero before the first call)."""
        if self._pool is None:
            return PoolStatistics(
                max_workers=self.max_workers, workers=0, idle=0, waiting=0, started=0, exited=0
            )
        return self._pool.statistics()

    # -- one call ----------------------------------------------------------------

    async def _run_on(
        self,
        pool: WorkerPool,
        worker: WorkerHandle,
        name: TargetName,
        context: TaskContext,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        signals = context.carrier_signals
        if not signals.enter_from_loop():
            pool.release(worker)
            raise NeverStarted(f"task {context.task_id!r} was stopped before a worker took it")
        job = Job(next(self._seq), context, worker)
        frame = job.run_frame(name, args, kwargs)
        worker.job = job
        worker.send_frame(frame)
        signals.relay_requests(job.relay)
        try:
            value = await job.future
        except asyncio.CancelledError:
            if not job.future.done() or job.future.cancelled():
                how = await finish_despite_cancellation(worker.end(self.grace))
                signals.carrier_end = how
                raise
            # It ended on its own just as we were cancelled: that is what happened.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            value = job.future.result()  # or raises what the task raised
        finally:
            signals.relay_requests(None)
            if worker.job is job:
                worker.job = None
            pool.release(worker)
        return value

    # -- workers -----------------------------------------------------------------

    def _pool_of_this_loop(self) -> WorkerPool | None:
        """The pool, if it serves the running loop; ``None`` if there is none.

        A pool whose loop is closed can hear from its workers no more: they
        are killed and reaped without it, and it is dropped. A pool whose
        loop is open elsewhere is refused.
        """
        pool = self._pool
        if pool is None or pool.loop is asyncio.get_running_loop():
            return pool
        if not pool.loop.is_closed():
            raise ConfigurationError(
                "a ProcessExecutor serves the event loop it first ran on, and that loop "
                "is still open; create one executor per event loop"
            )
        for worker in pool.workers:  # their loop is gone: end them without it
            worker.discard()
        self._pool = None
        return None

    def _pool_for(self) -> WorkerPool:
        pool = self._pool_of_this_loop()
        if pool is not None:
            return pool
        if self.start_method == "forkserver":
            _preload_in_fork_server()
        self._pool = pool = WorkerPool(
            self._context, self.max_workers, deliver_message, worker_exited
        )
        return pool

    def _name_of(self, fn: Callable[..., Any]) -> TargetName:
        entry = self._names.get(id(fn))
        if entry is not None and entry[0] is fn:
            return entry[1]
        name = name_target(fn)
        if len(self._names) >= _MAX_NAMES:
            self._names.clear()
        self._names[id(fn)] = (fn, name)
        return name


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _preload_in_fork_server() -> None:
    """Have the fork server import the worker code once, so each fork starts warm.

    Only before the server starts (a preload list is read at its start); the
    modules the user asked it to preload are kept.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    if server is None or getattr(server, "_forkserver_pid", None) is not None:
        return
    preload = list(getattr(server, "_preload_modules", ["__main__"]))
    worker_module = "chongming.executors.process.worker"
    if worker_module not in preload:
        forkserver.set_forkserver_preload([*preload, worker_module])
