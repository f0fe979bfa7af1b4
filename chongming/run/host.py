"""What a :class:`TaskRun` needs from whoever drives it, and what it offers back.

The controller's host is the real one (admission, counts, persistence); a
standalone run uses :class:`StandaloneHost`, which dispatches at once and
persists nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import Any, Protocol

from chongming.executors.base import Executor
from chongming.executors.thread import ThreadExecutor
from chongming.run.defaults import resolve_executor
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.task_api.spec import TaskSpec

__all__ = ["HostedRun", "OwnedTasks", "RunHost", "StandaloneHost", "cancel_and_wait"]

_log = logging.getLogger("chongming.run")
_MIN_SWEEP = 1024
_NO_COUNTS: dict[TaskStatus, int] = dict.fromkeys(TaskStatus, 0)
#: The thread executor every standalone run shares (docs/executors.md): made on
#: first use, never closed (it holds no thread of its own; anyio's pool does).
_SHARED_THREADS: list[ThreadExecutor] = []


class HostedRun(Protocol):
    """What a host may read from and ask of a run."""

    @property
    def task_id(self) -> str: ...
    @property
    def status(self) -> TaskStatus: ...
    @property
    def status_version(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def bucket(self) -> int | None: ...
    @property
    def tags(self) -> Collection[str]: ...
    @property
    def last_transition(self) -> Transition: ...
    @property
    def caller_context(self) -> contextvars.Context: ...

    def dispatch(self) -> bool:
        """Start the next attempt if the run is still queued."""
        ...


class RunHost(Protocol):
    def enqueue(self, run: HostedRun) -> None:
        """``run`` entered ``queued``; call ``run.dispatch()`` when it may start."""

    def withdraw(self, run: HostedRun) -> None:
        """A queued ``run`` left the queue without being dispatched."""

    def release(self, run: HostedRun) -> None:
        """A dispatched ``run`` gave its slot back (finished, retry wait, lost)."""

    def park(self, run: HostedRun) -> None:
        """``run`` (a durable task) went back to the queue until its wake-up time: let it go.

        A fact it waits for that was sent while it was being parked is the
        store's to honour: the park's own write wakes it.
        """

    def hands_back(self, run: HostedRun) -> bool:
        """The host is closing and another node can take ``run``: give it back, do not end it.

        True for a closing worker's claimed runs: a retry goes back to the
        queue instead of waiting here, and :meth:`TaskRun.hand_back` applies.
        """

    def requeues_retry(self, run: HostedRun) -> str | None:
        """Why a retry of ``run`` goes back to the queue instead of waiting here (None: it waits).

        A worker with a rate limit on one of the run's tags: the next attempt
        is a start, and asks the store for its grant like the first one did.
        """

    def spawn(self, run: HostedRun, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start ``coro`` as a task the host owns (and cancels and awaits on close).

        It runs in a copy of ``run.caller_context``: a task sees the context
        variables of whoever submitted it, never those another task (or its
        own earlier attempt) set.
        """

    #: Runs per status; the run moves its own count on every transition.
    per_status: dict[TaskStatus, int]

    #: False when :meth:`launch_gate` answers None for every run (no store): the
    #: run does not ask, one call less per attempt.
    gated: bool

    #: ``sink(run, previous)`` after every transition (``run`` moved from
    #: ``previous`` to ``run.status``): persist, publish, retire an ended run.
    #: ``None`` when nothing listens: the run then calls :meth:`retire` itself
    #: on its end. ``run.last_transition`` builds the full record when needed.
    sink: Callable[[Any, TaskStatus], None] | None

    def retire(self, run: HostedRun) -> None:
        """``run`` ended (called by the run when the host has no sink)."""

    def executor_for(self, choice: object, spec: TaskSpec) -> Executor | None:
        """The executor that carries ``spec`` (``None``: a coroutine on the loop)."""

    def launch_gate(self, run: HostedRun) -> Callable[[], Awaitable[bool]] | None:
        """What an attempt awaits before it calls the function (``None``: nothing).

        With a store: ``starting`` is durable. False means do not start. A
        callable, so nothing is made for an attempt cancelled before it ran.
        """

    def settled(self, run: HostedRun) -> Awaitable[bool] | None:
        """What ``wait()`` awaits after the end (``None``: nothing): the end is durable."""


class OwnedTasks:
    """The attempt tasks a host started: tracked, then cancelled and awaited on close.

    Plain asyncio tasks rather than an anyio task group: a cancel scope per
    attempt would cost more than the whole rest of the hot path. Ended tasks
    are swept out when the set has doubled since the last sweep (amortised
    O(1)) instead of by a done callback each, which would cost every task one
    more trip through the loop.
    """

    __slots__ = ("_sweep_at", "_tasks")

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweep_at = _MIN_SWEEP

    def spawn(
        self,
        coro: Coroutine[Any, Any, None],
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name, context=context)
        tasks = self._tasks
        tasks.add(task)
        if len(tasks) > self._sweep_at:
            self._sweep()
        return task

    def _sweep(self) -> None:
        live = {task for task in self._tasks if not task.done()}
        self._tasks = live
        self._sweep_at = max(2 * len(live), _MIN_SWEEP)

    @property
    def idle(self) -> bool:
        return all(task.done() for task in self._tasks)

    async def cancel_and_wait(self, timeout: float) -> None:
        await cancel_and_wait(self._tasks, timeout)


class StandaloneHost:
    """Hosts one run with no admission limit and no store.

    Its sync functions go to the one thread executor all standalone runs
    share, so concurrent ``run_task`` calls are bounded together (40 threads
    per loop), as ``anyio.to_thread.run_sync`` calls are.
    """

    def __init__(self) -> None:
        self._tasks = OwnedTasks()
        self.per_status: dict[TaskStatus, int] = _NO_COUNTS.copy()
        self.sink: Callable[[Any, TaskStatus], None] | None = None
        self.gated = False

    def enqueue(self, run: HostedRun) -> None:
        run.dispatch()

    def withdraw(self, run: HostedRun) -> None:
        pass

    def release(self, run: HostedRun) -> None:
        pass

    def park(self, run: HostedRun) -> None:
        raise RuntimeError("a standalone run cannot park: it has no store to wait in")

    def retire(self, run: HostedRun) -> None:
        pass

    def hands_back(self, run: HostedRun) -> bool:
        return False

    def requeues_retry(self, run: HostedRun) -> str | None:
        return None

    def spawn(self, run: HostedRun, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        return self._tasks.spawn(
            coro, name=f"chongming:{run.task_id}", context=run.caller_context.copy()
        )

    def executor_for(self, choice: object, spec: TaskSpec) -> Executor | None:
        return resolve_executor(choice, spec, self._thread_executor)

    def launch_gate(self, run: HostedRun) -> Callable[[], Awaitable[bool]] | None:
        return None

    def settled(self, run: HostedRun) -> Awaitable[bool] | None:
        return None

    def _thread_executor(self) -> Executor:
        if not _SHARED_THREADS:
            _SHARED_THREADS.append(ThreadExecutor())
        return _SHARED_THREADS[0]

    @property
    def idle(self) -> bool:
        return self._tasks.idle

    async def aclose(self, timeout: float) -> None:
        """Cancel and await every task it spawned, for at most ``timeout`` seconds.

        The shared thread executor stays open: its calls of this host's run
        have returned once the run's attempt task has (an abandoned thread is
        never waited for).
        """
        await self._tasks.cancel_and_wait(timeout)


async def cancel_and_wait(tasks: set[asyncio.Task[None]], timeout: float) -> None:
    """Cancel ``tasks`` and wait for them, bounded; a task that refuses is logged.

    The wait is shielded from our own cancellation: a cleanup that is cut
    short is how "Task was destroyed but it is pending" happens.
    """
    pending = {task for task in tasks if not task.done()}
    if not pending:
        return
    for task in pending:
        task.cancel()
    waiter = asyncio.ensure_future(asyncio.wait(pending, timeout=timeout))
    try:
        _, still = await asyncio.shield(waiter)
    except asyncio.CancelledError:
        _, still = await waiter
        raise
    finally:
        for task in pending:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: already recorded on the run
    for task in still:
        _log.warning("task %s ignored cancellation; abandoning it", task.get_name())
