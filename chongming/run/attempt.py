"""One attempt of a task: launch the carrier, watch its timeouts, judge its end."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from typing import TYPE_CHECKING

from chongming.errors import PayloadError
from chongming.executors.base import Executor, StopSemantics
from chongming.run.verdict import Force, ForceKind, Verdict, VerdictKind, judge
from chongming.state.payload import check_payload
from chongming.state.records import Failure, FailureKind, JsonValue
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import AttemptSignals, CarrierKind

if TYPE_CHECKING:
    from chongming.run.task_run import TaskRun

__all__ = ["Attempt"]

_log = logging.getLogger("chongming.run")


class Attempt:
    """Owned by its :class:`TaskRun`; at most one is current at a time.

    All methods run on the event-loop thread. The driver coroutine reports
    its end once; timers that give up on a carrier report for it, and a late
    end after that is dropped (the run already recorded ``lost``).
    """

    __slots__ = (
        "_cancel_timer",
        "_grace_timer",
        "_loop",
        "_watch_timer",
        "context",
        "executor",
        "finished",
        "force",
        "number",
        "paused_since",
        "paused_total",
        "run",
        "signals",
        "started",
        "task",
    )

    def __init__(self, run: TaskRun, number: int, executor: Executor | None) -> None:
        self.run = run
        self.number = number
        self.executor = executor
        self._loop = asyncio.get_running_loop()
        carrier = CarrierKind.COROUTINE if executor is None else executor.carrier
        self.signals = AttemptSignals(carrier, self._loop, self._pause_reached, self._launched)
        self.context: TaskContext | None = None
        self.task: asyncio.Task[None] | None = None
        self.force: Force | None = None
        self.finished = False
        self.started = 0.0
        self.paused_since: float | None = None
        self.paused_total = 0.0
        self._watch_timer: asyncio.TimerHandle | None = None
        self._grace_timer: asyncio.TimerHandle | None = None
        self._cancel_timer: asyncio.TimerHandle | None = None

    @property
    def stop_semantics(self) -> StopSemantics | None:
        return None if self.executor is None else self.executor.stop_semantics

    def launch(self) -> None:
        self.task = self.run.host.spawn(self.run, self._drive())

    # -- the driver ------------------------------------------------------------

    async def _drive(self) -> None:
        run = self.run
        spec = run.spec
        on_loop = self.executor is None or self.executor.carrier is CarrierKind.INLINE
        context = TaskContext(
            task_id=run.task_id,
            name=run.name,
            attempt=self.number,
            signals=self.signals,
            artifact_root=run.artifact_root,
            on_progress=run.report_progress,
            upstream=run.upstream,
        )
        self.context = context
        if on_loop:
            # Coroutines and inline calls start right here, on this thread.
            if not self.signals.enter(from_thread=False):
                self._report(Verdict(kind=VerdictKind.STOPPED))
                return
            self._launched()
        try:
            if self.executor is None:
                value = await spec.fn(context, *run.args, **run.kwargs)
            else:
                value = await self.executor.run(spec.fn, context, run.args, run.kwargs)
        except asyncio.CancelledError:
            if self.force is None:
                # The host cancelled us (shutdown or a cancelled surrounding scope).
                self.force = Force(kind=ForceKind.SHUTDOWN, cancelled=True)
                self._finish(cancelled=True)
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self._finish(cancelled=True)
        except (KeyboardInterrupt, SystemExit) as error:
            # Only coroutines get here (carriers wrap these); record, then let it end the loop.
            self._finish(error=error)
            raise
        except BaseException as error:
            self._finish(error=error)
        else:
            self._finish(returned=True, value=value)

    def _launched(self) -> None:
        """The carrier is about to call the function: the attempt is running."""
        if self.finished or self.force is not None:
            return
        self.started = time.monotonic()
        self.run.begin_attempt(self)
        self._arm_watch()

    def _finish(
        self,
        *,
        returned: bool = False,
        value: JsonValue = None,
        error: BaseException | None = None,
        cancelled: bool = False,
    ) -> None:
        if self.finished:
            _log.info(
                "attempt %d of task %r ended after it was given up as lost",
                self.number,
                self.run.task_id,
            )
            return
        verdict = judge(
            returned=returned,
            value=value,
            error=error,
            cancelled=cancelled,
            launched=self.signals.abandon() if cancelled else True,
            force=self.force,
            stop_requested=self.signals.stop_requested,
            stop_semantics=self.stop_semantics,
        )
        if verdict.kind is VerdictKind.SUCCEEDED:
            verdict = _check_result(verdict, self.context, self.run.max_payload_bytes)
        self._report(verdict)

    def _report(self, verdict: Verdict) -> None:
        self.finished = True
        self._cancel_timers()
        self.run.end_attempt(self, verdict)

    # -- control requests (from the run) ---------------------------------------

    def request_stop(self, grace: float) -> None:
        self._cancel_watch()
        self.signals.request_stop()
        if self._grace_timer is None:
            self._grace_timer = self._loop.call_later(grace, self._grace_expired)

    def _grace_expired(self) -> None:
        self._grace_timer = None
        if self.finished:
            return
        base = self.force or Force(kind=ForceKind.STOP)
        self._force(dataclasses.replace(base, cancelled=True))

    def _force(self, force: Force) -> None:
        """Cancel the carrier; a coroutine gets a last window to unwind."""
        self.force = force
        if self.task is None or self.task.done():
            return
        self.task.cancel()
        if self.executor is None and self._cancel_timer is None:
            window = self.run.windows.cancel_window
            self._cancel_timer = self._loop.call_later(window, self._cancel_window_expired)

    def _cancel_window_expired(self) -> None:
        self._cancel_timer = None
        if self.finished:
            return
        message = "the coroutine did not end after it was cancelled (it swallows cancellation)"
        failure = Failure(kind=FailureKind.LOST, message=message, retryable=False)
        self._report(Verdict(kind=VerdictKind.LOST, failure=failure))

    # -- pause -----------------------------------------------------------------

    def _pause_reached(self) -> None:
        if not self.finished:
            self.run.pause_reached(self)

    def suspend_clock(self) -> None:
        self._cancel_watch()
        self.paused_since = time.monotonic()

    def resume_clock(self) -> None:
        if self.paused_since is not None:
            self.paused_total += time.monotonic() - self.paused_since
            self.paused_since = None
        self.signals.beat()
        self._arm_watch()

    # -- timeouts --------------------------------------------------------------

    def _arm_watch(self) -> None:
        timeout = self.run.timeout
        if timeout is None or not timeout.watches_attempt or self.force is not None:
            return
        expiry = timeout.attempt_expiry(self.started + self.paused_total, self.signals.heartbeat)
        if expiry is None:
            return
        delay = max(0.0, expiry.at - time.monotonic())
        self._watch_timer = self._loop.call_later(delay, self._watch_fired)

    def _watch_fired(self) -> None:
        self._watch_timer = None
        if self.finished or self.force is not None or self.paused_since is not None:
            return
        if self.signals.stop_requested:
            return
        timeout = self.run.timeout
        assert timeout is not None
        expiry = timeout.attempt_expiry(self.started + self.paused_total, self.signals.heartbeat)
        if expiry is None:
            return
        if expiry.at > time.monotonic():
            self._arm_watch()  # a checkpoint moved the idle deadline
            return
        force = Force(kind=ForceKind.TIMEOUT, timeout_kind=expiry.kind)
        if self.stop_semantics is StopSemantics.ABANDON:
            # A thread can only be asked; give it the grace window before giving up.
            self.force = force
            self.request_stop(self.run.windows.stop_grace)
        else:
            self._force(dataclasses.replace(force, cancelled=True))

    # -- housekeeping ----------------------------------------------------------

    def _cancel_watch(self) -> None:
        if self._watch_timer is not None:
            self._watch_timer.cancel()
            self._watch_timer = None

    def _cancel_timers(self) -> None:
        self._cancel_watch()
        for name in ("_grace_timer", "_cancel_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)


def _check_result(verdict: Verdict, context: TaskContext | None, limit: int | None) -> Verdict:
    if context is not None and context.has_unawaited_checkpoint:
        error = context.misuse_error()
        failure = Failure(
            kind=FailureKind.EXCEPTION,
            message=str(error),
            exception_type=type(error).__name__,
            retryable=False,
        )
        return Verdict(kind=VerdictKind.FAILED, failure=failure, error=error)
    value: JsonValue = verdict.value
    if inspect.iscoroutine(value):
        value.close()  # never awaited: close it so Python does not warn at exit
        failure = Failure(
            kind=FailureKind.RESULT_INVALID,
            message="the task returned a coroutine; declare the task function `async def`",
            exception_type="coroutine",
            retryable=False,
        )
        return Verdict(kind=VerdictKind.FAILED, failure=failure)
    try:
        check_payload(value, "result", limit)
    except PayloadError as error:
        failure = Failure(
            kind=FailureKind.RESULT_INVALID,
            message=f"{error}; return JSON data (store large data elsewhere and return a pointer)",
            exception_type=type(value).__name__,
            retryable=False,
        )
        return Verdict(kind=VerdictKind.FAILED, failure=failure)
    return verdict
