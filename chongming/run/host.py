"""What a :class:`TaskRun` needs from whoever drives it.

The controller is the real host (admission, persistence); a standalone run
uses :class:`StandaloneHost`, which dispatches at once and persists nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from chongming.state.status import TaskStatus

if TYPE_CHECKING:
    from chongming.run.task_run import TaskRun

__all__ = ["OwnedTasks", "RunHost", "StandaloneHost", "cancel_and_wait"]

_log = logging.getLogger("chongming.run")


class RunHost(Protocol):
    def enqueue(self, run: TaskRun) -> None:
        """``run`` entered ``queued``; call ``run.dispatch()`` when it may start."""

    def withdraw(self, run: TaskRun) -> None:
        """A queued ``run`` left the queue without being dispatched."""

    def release(self, run: TaskRun) -> None:
        """A dispatched ``run`` gave its slot back (finished, retry wait, lost)."""

    def spawn(self, run: TaskRun, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start ``coro`` as a task the host owns (and cancels and awaits on close)."""

    def record(self, run: TaskRun, previous: TaskStatus) -> None:
        """``run`` moved from ``previous`` to ``run.status``: persist, publish, count.

        ``run.last_transition`` builds the full record when the host needs it.
        """


class OwnedTasks:
    """The attempt tasks a host started: tracked, then cancelled and awaited on close.

    Plain asyncio tasks rather than an anyio task group: a cancel scope per
    attempt would cost more than the whole rest of the hot path.
    """

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str | None = None) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def idle(self) -> bool:
        return all(task.done() for task in self._tasks)

    async def cancel_and_wait(self, timeout: float) -> None:
        await cancel_and_wait(self._tasks, timeout)


class StandaloneHost:
    """Hosts runs with no admission limit and no store."""

    def __init__(self) -> None:
        self._tasks = OwnedTasks()

    def enqueue(self, run: TaskRun) -> None:
        run.dispatch()

    def withdraw(self, run: TaskRun) -> None:
        pass

    def release(self, run: TaskRun) -> None:
        pass

    def record(self, run: TaskRun, previous: TaskStatus) -> None:
        pass

    def spawn(self, run: TaskRun, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name=f"chongming:{run.task_id}")

    @property
    def idle(self) -> bool:
        return self._tasks.idle

    async def aclose(self, timeout: float) -> None:
        """Cancel and await every task it spawned, for at most ``timeout`` seconds."""
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
