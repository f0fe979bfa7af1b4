"""``TaskRun``: the handle of one task — read it, stop, pause, resume, wait for it.

Everything that moves the run lives in :class:`~chongming.run.lifecycle.RunLifecycle`;
this class adds what users call.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from chongming.errors import ConfigurationError
from chongming.run.host import StandaloneHost
from chongming.run.lifecycle import RunLifecycle, call_done_callback, check_actor, check_tags
from chongming.run.outcome import Outcome
from chongming.run.statuses import PAUSED, PAUSING, RUNNING, SUCCEEDED
from chongming.state.payload import (
    check_reason,
)
from chongming.state.records import TaskSnapshot
from chongming.state.triggers import Trigger

__all__ = ["TaskRun", "check_tags", "steps_of"]

#: ``steps_of(run)``: a TaskRun's history as compact steps (``run/history.py``), oldest
#: first, in one C call and without building a record. Metrics read it per transition.
steps_of: Callable[[Any], Sequence[Any]] = operator.attrgetter("_history")


_from_timestamp = datetime.fromtimestamp

#: The queue fields of a task made here: none (its snapshot keeps the defaults).
_MADE_HERE: dict[str, Any] = {}


def _queue_fields(stored: TaskSnapshot) -> dict[str, Any]:
    return {
        "version": stored.version,
        "not_before": stored.not_before,
        "idempotency_key": stored.idempotency_key,
    }


class TaskRun(RunLifecycle):
    """The handle of one task: its state, its history and the ways to act on it.

    Used alone as ``async with TaskRun(fn, args) as run: ...`` (or through
    :func:`run_task`), or created by a :class:`Controller`, which owns it.
    """

    __slots__ = ()

    @property
    def outcome(self) -> Outcome | None:
        """How the task ended; ``None`` until it has."""
        if self._finished_at is None:
            return None
        if self._outcome is None:
            # Built on demand: finished runs are many and mostly never asked.
            self._outcome = self._build_outcome()
        return self._outcome

    @property
    def last_trigger(self) -> str:
        """The latest transition's trigger, without building its record (metrics count it)."""
        return self._history[-1][4]

    @property
    def snapshot(self) -> TaskSnapshot:
        """The latest state as a frozen record (built for every write to a store)."""
        beat = self.heartbeat_at()
        heartbeat = None if beat is None else _from_timestamp(beat, UTC)
        queued, started, finished = self._queued_at, self._started_at, self._finished_at
        stored = self.adopted
        return TaskSnapshot(
            task_id=self.task_id,
            name=self.name,
            label=self.label,
            status=self.status,
            status_version=self.status_version,
            attempt=self.attempt,
            max_attempts=self.retry.max_attempts,
            # clock.to_datetime, inline: three to five per snapshot.
            created_at=_from_timestamp(self._created_at, UTC),
            updated_at=_from_timestamp(self._updated_at, UTC),
            bucket=self.bucket,
            bucket_key=self.bucket_key,
            tags=self.tags,
            priority=self.priority,
            owner=self.owner,
            queued_at=None if queued is None else _from_timestamp(queued, UTC),
            started_at=None if started is None else _from_timestamp(started, UTC),
            finished_at=None if finished is None else _from_timestamp(finished, UTC),
            last_heartbeat_at=heartbeat,
            progress=self._progress,
            failure=self._failure,
            result=self._result,
            args=self._inputs.args,
            kwargs=self._inputs.kwargs,
            # A claimed task keeps the queue fields of its stored row (one build, no replace).
            **(_MADE_HERE if stored is None else _queue_fields(stored)),
        )

    def _build_outcome(self) -> Outcome:
        elapsed = 0.0
        if self._started_mono is not None and self._finished_mono is not None:
            elapsed = self._finished_mono - self._started_mono
        status = self.status
        return Outcome(
            task_id=self.task_id,
            status=status,
            value=self._result if status is SUCCEEDED else None,
            failure=self._failure,
            attempts=self.attempt,
            elapsed=elapsed,
        )

    def add_done_callback(self, callback: Callable[[TaskRun], None]) -> None:
        """Call ``callback(run)`` once the run has ended (at once if it has).

        A callback that raises is logged; it cannot keep the run, its slot
        or the other callbacks from finishing.
        """
        if self._finished_at is not None:
            call_done_callback(callback, self)
        elif self._done_callbacks is None:
            self._done_callbacks = [callback]
        else:
            self._done_callbacks.append(callback)

    # -- control -------------------------------------------------------------------

    async def stop(self, *, reason: str | None = None, actor: str = "user") -> bool:
        """Ask the task to stop. Returns whether a request was issued.

        A task that has not started ends ``stopped`` at once. A running task
        goes to ``stopping`` and ends ``stopped`` only once it really ended:
        at its next checkpoint, or when its grace window runs out (a
        coroutine is then cancelled; a thread is abandoned and recorded
        ``lost``). Use :meth:`wait` to see the end.
        """
        reason = check_reason(reason)
        actor = check_actor(actor)
        return self._request_stop(Trigger.USER_STOP, actor=actor, reason=reason)

    async def force_stop(self, *, reason: str | None = None, actor: str = "user") -> bool:
        """Stop now: end the stop grace window at once (also after :meth:`stop`).

        A coroutine is cancelled; a thread cannot be killed, so it is abandoned
        and recorded ``lost``; a process is killed. Returns whether anything was
        done (``False`` once the task has ended).
        """
        reason = check_reason(reason)
        actor = check_actor(actor)
        return self._force_stop(Trigger.USER_STOP, actor=actor, reason=reason)

    def shutdown(self, reason: str) -> bool:
        """The host is closing: stop like :meth:`stop`, recorded as the runtime's doing."""
        return self._request_stop(Trigger.SHUTDOWN, actor="system", reason=reason)

    async def pause(self, *, actor: str = "user", reason: str | None = None) -> bool:
        """Ask the task to pause at its next checkpoint.

        Returns ``True`` once it is paused. When no checkpoint is reached
        within the pause window the state rolls back to ``running`` and the
        result is ``False`` — never a pretend pause. A paused task keeps its
        concurrency slot. Cancelling the caller does not cancel the pause.
        """
        reason = check_reason(reason)
        actor = check_actor(actor)
        status = self.status
        if status is PAUSED:
            return True
        if status is PAUSING and self._pause_waiter is not None:
            return await asyncio.shield(self._pause_waiter)
        current = self._current
        if status is not RUNNING or current is None:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._pause_waiter = waiter
        self._move(PAUSING, Trigger.USER_PAUSE, actor=actor, reason=reason)
        current.request_pause()
        self._pause_timer = loop.call_later(self.windows.pause_window, self._pause_window_over)
        return await asyncio.shield(waiter)

    async def resume(self, *, actor: str = "user", reason: str | None = None) -> bool:
        """Resume a paused (or pausing) task. Returns whether it was resumed."""
        reason = check_reason(reason)
        actor = check_actor(actor)
        status = self.status
        current = self._current
        if status not in (PAUSED, PAUSING) or current is None:
            return False
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        self._move(RUNNING, Trigger.USER_RESUME, actor=actor, reason=reason)
        current.withdraw_pause()
        if status is PAUSED:
            current.resume_clock()
        return True

    async def wait(self, timeout: float | None = None) -> Outcome:
        """Wait for the end and return the outcome.

        Raises :class:`TimeoutError` when the end was not seen within
        ``timeout`` seconds; that changes nothing about the task. Cancelling
        the caller does not affect the task either.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
        ):
            raise ConfigurationError(f"timeout must be a number >= 0, got {timeout!r}")
        if timeout is None:
            await self._until_settled()  # no timeout scope to enter: the common case
        else:
            async with asyncio.timeout(timeout):
                await self._until_settled()
        outcome = self.outcome
        assert outcome is not None
        return outcome

    async def _until_settled(self) -> None:
        """Until the end is seen here and, with a store, held by it (or its write failed:
        then ``persist_failures`` says it is pending).

        Each waiter awaits a future of its own, resolved by the end: a waiter
        cancelled or timed out cancels only its own (no shield around a shared one,
        which cost every wait one more trip through the loop).
        """
        if self._finished_at is None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            waiters = self._waiters
            if waiters is None:
                self._waiters = [waiter]
            else:
                waiters.append(waiter)
            try:
                await waiter
            finally:
                waiters = self._waiters  # None once the end resolved them all
                if waiters is not None and waiter in waiters:
                    waiters.remove(waiter)
        settled = self.host.settled(self)
        if settled is not None:
            await asyncio.shield(settled)

    # -- standalone use ------------------------------------------------------------

    async def __aenter__(self) -> TaskRun:
        if not self._owns_host:
            raise ConfigurationError("this run belongs to a controller; it cannot be entered")
        self.submit()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        host = self.host
        if self.done and isinstance(host, StandaloneHost) and host.idle:
            return  # nothing of the host is left to cancel or await
        await asyncio.shield(self._close_standalone())

    async def _close_standalone(self) -> None:
        if not self.done:
            self.shutdown("the run's context exited")
            bound = self.windows.stop_grace + self.windows.cancel_window + 1.0
            try:
                await self.wait(timeout=bound)
            except TimeoutError:
                pass
        host = self.host
        if isinstance(host, StandaloneHost):
            await host.aclose(timeout=self.windows.cancel_window)

    def __repr__(self) -> str:
        return (
            f"<TaskRun {self.task_id!r} {self.name!r} {self.status.value} v{self.status_version}>"
        )
