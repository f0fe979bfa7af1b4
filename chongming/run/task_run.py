"""``TaskRun``: the handle of one task — its lifecycle and the ways to act on it.

Status, version and history live in a :class:`~chongming.run.record.RunRecord`
(the one writer of them); each attempt is an :class:`~chongming.run.attempt.Attempt`
that sees this run only as its listener.

**Every attempt ends.** Whatever user-supplied code does (a retry predicate
that raises, a done callback that raises, a function that returns while a
helper of it is parked at a checkpoint), the run reaches a legal state and its
slot is given back exactly once. A failure of the runtime's own bookkeeping is
recorded on the run (``failed``, kind ``exception``, naming what failed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections import deque
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from chongming.clock import SYSTEM_CLOCK, Clock, to_datetime
from chongming.errors import ConfigurationError, PayloadError
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.attempt import Attempt
from chongming.run.defaults import DEFAULT_RETRY, DEFAULT_WINDOWS, default_artifact_root
from chongming.run.defaults import new_task_id as new_task_id
from chongming.run.host import RunHost, StandaloneHost
from chongming.run.outcome import Outcome
from chongming.run.plan import AttemptInputs, AttemptPlan, plan_for
from chongming.run.record import RunRecord, optional_datetime
from chongming.run.verdict import Verdict, VerdictKind, storable_text
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_label,
    check_reason,
    check_task_id,
    json_form_arguments,
)
from chongming.state.records import Failure, FailureKind, JsonValue, Progress, TaskSnapshot
from chongming.state.records import Transition as TransitionRecord
from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS
from chongming.state.triggers import Trigger
from chongming.task_api.spec import TaskSpec, spec_for

__all__ = ["TaskRun", "check_tags"]

_log = logging.getLogger("chongming.run")
_S = TaskStatus
_NOT_STARTED = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})
_TERMINAL = frozenset(s for s in TaskStatus if s.is_terminal)


class TaskRun:
    """The handle of one task: its state, its history and the ways to act on it.

    Used alone as ``async with TaskRun(fn, args) as run: ...`` (or through
    :func:`run_task`), or created by a :class:`Controller`, which owns it.
    """

    __slots__ = (
        "_current",
        "_done",
        "_done_callbacks",
        "_failure",
        "_finished_mono",
        "_holds_slot",
        "_inputs",
        "_outcome",
        "_owns_host",
        "_pause_timer",
        "_pause_waiter",
        "_plan",
        "_progress",
        "_record",
        "_result",
        "_retry_timer",
        "_start_timer",
        "_started_mono",
        "_stop_reason",
        "_time",
        "bucket",
        "bucket_key",
        "host",
        "label",
        "name",
        "owner",
        "priority",
        "retry",
        "spec",
        "tags",
        "task_id",
        "timeout",
        "upstream",
        "windows",
    )

    def __init__(
        self,
        fn: Callable[..., Any] | TaskSpec,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        task_id: str | None = None,
        name: str | None = None,
        label: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        executor: object = None,
        tags: Collection[str] | None = None,
        priority: int | None = None,
        bucket: int | None = None,
        bucket_key: str | None = None,
        owner: str | None = None,
        windows: ControlWindows | None = None,
        clock: Clock | None = None,
        artifact_root: Path | None = None,
        upstream: Mapping[str, JsonValue] | None = None,
        host: RunHost | None = None,
        max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        # Every check before anything is built: a refused run leaves nothing behind.
        spec = fn if isinstance(fn, TaskSpec) else spec_for(fn)
        args = tuple(args)
        kwargs = dict(kwargs or {})
        spec.bind_check(args, kwargs)
        if args or kwargs:
            args, kwargs = json_form_arguments(args, kwargs, max_payload_bytes)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
        if timeout is not None and not isinstance(timeout, Timeout):
            raise ConfigurationError(f"timeout must be a Timeout, got {type(timeout).__name__}")
        if windows is not None and not isinstance(windows, ControlWindows):
            raise ConfigurationError(
                f"windows must be a ControlWindows, got {type(windows).__name__}"
            )
        if bucket_key is not None and not isinstance(bucket_key, str):
            raise PayloadError("bucket_key", f"must be a string, got {type(bucket_key).__name__}")
        if priority is not None and (
            isinstance(priority, bool)
            or not isinstance(priority, int)
            or not -(2**31) <= priority < 2**31
        ):
            raise ConfigurationError(f"priority must be a 32-bit int, got {priority!r}")
        self.host: RunHost = host if host is not None else StandaloneHost()
        self._owns_host = host is None
        self.spec = spec
        self.task_id = new_task_id() if task_id is None else check_task_id(task_id)
        self.name = name or spec.name
        self.label = check_label(label) if label is not None else self.name
        self.retry = retry or spec.retry or DEFAULT_RETRY
        self.timeout = timeout or spec.timeout
        self.tags = spec.tags if tags is None else check_tags(tags)
        self.priority = spec.priority if priority is None else priority
        self.bucket = bucket
        self.bucket_key = bucket_key
        self.owner = owner
        self.windows = windows or DEFAULT_WINDOWS
        self.upstream = upstream
        self._plan: AttemptPlan = plan_for(
            name=self.name,
            fn=spec.fn,
            executor=self.host.executor_for(executor or spec.executor, spec),
            timeout=self.timeout,
            windows=self.windows,
            artifact_root=artifact_root or default_artifact_root(),
            max_payload_bytes=max_payload_bytes,
        )
        self._inputs = AttemptInputs(
            task_id=self.task_id, args=args, kwargs=kwargs, upstream=upstream
        )
        self._time = (clock or SYSTEM_CLOCK).time
        self._record = RunRecord(self.task_id, self._time())
        self._started_mono: float | None = None
        self._finished_mono: float | None = None
        self._progress: Progress | None = None
        self._failure: Failure | None = None
        self._result: JsonValue = None
        self._current: Attempt | None = None
        self._holds_slot = False
        self._stop_reason: str | None = None
        self._start_timer: asyncio.TimerHandle | None = None
        self._retry_timer: asyncio.TimerHandle | None = None
        self._pause_timer: asyncio.TimerHandle | None = None
        self._pause_waiter: asyncio.Future[bool] | None = None
        self._done: asyncio.Future[None] | None = None
        self._done_callbacks: list[Callable[[TaskRun], None]] | None = None
        self._outcome: Outcome | None = None

    # -- reading -----------------------------------------------------------------

    @property
    def status(self) -> TaskStatus:
        return self._record.status

    @property
    def status_version(self) -> int:
        return self._record.version

    @property
    def attempt(self) -> int:
        return self._record.attempt

    @property
    def args(self) -> tuple[Any, ...]:
        """The arguments in their JSON form (what the function receives)."""
        return self._inputs.args

    @property
    def kwargs(self) -> dict[str, Any]:
        return self._inputs.kwargs

    @property
    def executor(self) -> object:
        return self._plan.executor

    @property
    def transitions(self) -> tuple[TransitionRecord, ...]:
        """The history so far, oldest first (a copy)."""
        return tuple(self._record.transitions())

    @property
    def last_transition(self) -> TransitionRecord:
        return self._record.last_transition()

    def transitions_since(self, version: int) -> list[TransitionRecord]:
        """Transitions with a version above ``version``, oldest first."""
        return self._record.transitions()[version:]

    @property
    def done(self) -> bool:
        return self._record.finished is not None

    @property
    def outcome(self) -> Outcome | None:
        """How the task ended; ``None`` until it has."""
        if self._record.finished is None:
            return None
        if self._outcome is None:
            # Built on demand: finished runs are many and mostly never asked.
            self._outcome = self._build_outcome()
        return self._outcome

    @property
    def holds_slot(self) -> bool:
        return self._holds_slot

    @property
    def snapshot(self) -> TaskSnapshot:
        """The latest state as a frozen record."""
        record = self._record
        heartbeat: datetime | None = None
        current = self._current
        if current is not None and current.context is not None:
            heartbeat = to_datetime(self._time() - current.signals.heartbeat_age())
        return TaskSnapshot(
            task_id=self.task_id,
            name=self.name,
            label=self.label,
            status=record.status,
            status_version=record.version,
            attempt=record.attempt,
            max_attempts=self.retry.max_attempts,
            created_at=to_datetime(record.created),
            updated_at=to_datetime(record.updated),
            bucket=self.bucket,
            bucket_key=self.bucket_key,
            tags=self.tags,
            priority=self.priority,
            owner=self.owner,
            queued_at=optional_datetime(record.queued),
            started_at=optional_datetime(record.started),
            finished_at=optional_datetime(record.finished),
            last_heartbeat_at=heartbeat,
            progress=self._progress,
            failure=self._failure,
            result=self._result,
            args=self._inputs.args,
            kwargs=self._inputs.kwargs,
        )

    # -- the one place that changes status ------------------------------------------

    def _move(
        self,
        target: TaskStatus,
        trigger: str,
        *,
        actor: str = "system",
        reason: str | None = None,
    ) -> None:
        record = self._record
        previous = record.move(target, trigger, self._time(), actor, reason)
        if previous is _S.PAUSING and target is not _S.PAUSED:
            self._settle_pause(False)
        if target is _S.RUNNING and self._started_mono is None:
            self._started_mono = asyncio.get_running_loop().time()
        try:
            self.host.record(self, previous)
        except Exception:
            # The host's bookkeeping is ours; a bug there must not strand the run.
            _log.exception("host failed to record %s -> %s of %r", previous, target, self.task_id)
        if target in _TERMINAL:
            self._finish()

    def _finish(self) -> None:
        self._finished_mono = asyncio.get_running_loop().time()
        for timer in (self._start_timer, self._retry_timer, self._pause_timer):
            if timer is not None:
                timer.cancel()
        self._start_timer = self._retry_timer = self._pause_timer = None
        if self._done is not None and not self._done.done():
            self._done.set_result(None)
        callbacks = self._done_callbacks
        if callbacks is not None:
            self._done_callbacks = None
            for callback in callbacks:
                _call_done_callback(callback, self)

    def _build_outcome(self) -> Outcome:
        elapsed = 0.0
        if self._started_mono is not None and self._finished_mono is not None:
            elapsed = self._finished_mono - self._started_mono
        status = self._record.status
        return Outcome(
            task_id=self.task_id,
            status=status,
            value=self._result if status is _S.SUCCEEDED else None,
            failure=self._failure,
            attempts=self._record.attempt,
            elapsed=elapsed,
        )

    def add_done_callback(self, callback: Callable[[TaskRun], None]) -> None:
        """Call ``callback(run)`` once the run has ended (at once if it has).

        A callback that raises is logged; it cannot keep the run, its slot
        or the other callbacks from finishing.
        """
        if self._record.finished is not None:
            _call_done_callback(callback, self)
        elif self._done_callbacks is None:
            self._done_callbacks = [callback]
        else:
            self._done_callbacks.append(callback)

    # -- lifecycle driven by the host ---------------------------------------------

    def submit(self) -> None:
        """``pending -> queued`` and hand the run to its host's admission."""
        self.mark_queued()
        self._hand_to_admission()

    def mark_queued(self) -> None:
        """``pending -> queued`` without admission yet (the host first makes it durable)."""
        self._move(_S.QUEUED, Trigger.DEPENDENCIES_RESOLVED)
        self._arm_start_timer()

    def enter_admission(self) -> None:
        """Hand a queued run to admission (a no-op if it left ``queued`` meanwhile)."""
        if self._record.status is _S.QUEUED:
            self._hand_to_admission()

    def discard(self) -> None:
        """The host refused this run after all (its creation failed): stop its timers."""
        for timer in (self._start_timer, self._retry_timer, self._pause_timer):
            if timer is not None:
                timer.cancel()
        self._start_timer = self._retry_timer = self._pause_timer = None

    def block(self) -> None:
        """``pending -> blocked``: a pipeline node waiting for its upstreams."""
        self._move(_S.BLOCKED, Trigger.WAITING_FOR_DEPENDENCIES)

    def unblock(self, upstream: Mapping[str, JsonValue] | None = None) -> None:
        """``blocked -> queued`` once the join condition holds."""
        if upstream is not None:
            self.upstream = upstream
            self._inputs = dataclasses.replace(self._inputs, upstream=upstream)
        self.submit()

    def skip(self, reason: str) -> bool:
        """``blocked -> skipped``: it was never meant to run."""
        if self._record.status is not _S.BLOCKED:
            return False
        self._move(_S.SKIPPED, Trigger.UPSTREAM_FAILED, reason=reason)
        return True

    def cancel(self, reason: str, trigger: str = Trigger.FAIL_FAST) -> bool:
        """Orchestration cascade: ``cancelled`` if not started, else a stop."""
        status = self._record.status
        if status in _NOT_STARTED:
            self._leave_waiting(status)
            self._move(_S.CANCELLED, trigger, reason=reason)
            return True
        return self._request_stop(trigger, actor="system", reason=reason)

    def dispatch(self) -> bool:
        """``queued -> starting`` and launch the attempt; False if no longer queued.

        The start timeout stays armed until the function really begins: a
        task waiting for a worker thread has not started.
        """
        if self._record.status is not _S.QUEUED:
            return False
        self._holds_slot = True
        self._move(_S.STARTING, Trigger.DISPATCH)
        gate = self.host.launch_gate(self)
        attempt = Attempt(self._plan, self._inputs, self._record.attempt, self, gate)
        self._current = attempt
        try:
            attempt.launch()
        except Exception as error:
            self._current = None
            self._fail_internally(error, "launching the attempt")
        return True

    # -- AttemptListener: what the current attempt reports ----------------------------

    def spawn_attempt(self, coro: Any) -> asyncio.Task[None]:
        return self.host.spawn(self, coro)

    def attempt_running(self, attempt: Attempt) -> None:
        """The carrier is calling the function: ``starting -> running``.

        A stop that arrived while the attempt was starting stays in force
        (``stopping``); the function sees it at its first checkpoint.
        """
        if attempt is not self._current:
            return
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        if self._record.status is _S.STARTING:
            self._move(_S.RUNNING, Trigger.LAUNCHED)

    def attempt_paused(self, attempt: Attempt, generation: int) -> None:
        """A checkpoint parked for pause ``generation``; a stale receipt is ignored."""
        signals = attempt.signals
        if (
            attempt is not self._current
            or self._record.status is not _S.PAUSING
            or not signals.pause_requested
            or generation != signals.pause_generation
        ):
            return
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        attempt.suspend_clock()
        self._move(_S.PAUSED, Trigger.PAUSE_REACHED)
        self._settle_pause(True)

    def attempt_ended(self, attempt: Attempt, verdict: Verdict) -> None:
        """Record what the verdict says, then give the slot back (exactly once)."""
        if attempt is not self._current or self._record.status in _TERMINAL:
            return
        self._current = None
        try:
            self._record_end(attempt, verdict)
        except Exception as error:
            self._fail_internally(error, "recording the end of the attempt")
        finally:
            self._give_back_slot()

    def report_progress(self, progress: Progress) -> None:
        """Hot path from ``ctx.progress``; may run on a worker thread."""
        self._progress = progress

    def _record_end(self, attempt: Attempt, verdict: Verdict) -> None:
        status = self._record.status
        if status is _S.PAUSED:
            # The function ended while parked elsewhere (a helper task or
            # thread sat at the checkpoint): release the pause, then say how.
            attempt.signals.withdraw_pause()
            attempt.resume_clock()
            self._move(_S.RUNNING, Trigger.PAUSE_RELEASED, reason="the task ended while paused")
            status = _S.RUNNING
        kind = verdict.kind
        if kind is VerdictKind.SUCCEEDED:
            self._result = verdict.value
            self._failure = None  # an earlier attempt's failure is history, not the outcome
            self._move(_S.SUCCEEDED, Trigger.COMPLETED)
        elif kind is VerdictKind.STOPPED:
            if status is not _S.STOPPING:
                self._move(_S.STOPPING, Trigger.SHUTDOWN, reason="the host is closing")
            self._move(_S.STOPPED, Trigger.STOP_CONFIRMED, reason=self._stop_reason)
        elif kind is VerdictKind.LOST:
            self._failure = verdict.failure
            trigger = Trigger.STOP_ABANDONED if status is _S.STOPPING else Trigger.TIMEOUT_ABANDONED
            self._move(_S.LOST, trigger, reason=self._stop_reason)
        else:
            self._record_failure(attempt, verdict)

    def _record_failure(self, attempt: Attempt, verdict: Verdict) -> None:
        failure = verdict.failure
        assert failure is not None
        self._failure = failure
        trigger = (
            Trigger.RESULT_INVALID if failure.kind is FailureKind.RESULT_INVALID else Trigger.FAILED
        )
        if self._record.status is _S.STOPPING:
            self._move(_S.FAILED, trigger, reason=self._stop_reason)
            return
        try:
            decision = self.retry.decide(attempt.number, failure, verdict.error, random.random())
        except Exception as error:
            # A user-supplied predicate or backoff raised: the task fails, saying why.
            self._failure = Failure(
                kind=FailureKind.EXCEPTION,
                message=storable_text(
                    f"the retry policy raised {type(error).__name__}: {error} "
                    f"while judging: {failure.message}"
                ),
                exception_type=storable_text(type(error).__name__),
                retryable=False,
            )
            self._move(_S.FAILED, trigger)
            return
        if not decision.retry:
            self._move(_S.FAILED, trigger)
            return
        self._move(_S.RETRY_WAIT, Trigger.RETRY_SCHEDULED, reason=failure.message[:200])
        loop = asyncio.get_running_loop()
        self._retry_timer = loop.call_later(decision.delay, self._retry_due)

    def _retry_due(self) -> None:
        self._retry_timer = None
        if self._record.status is _S.RETRY_WAIT:
            self._move(_S.QUEUED, Trigger.RETRY_DUE)
            self._hand_to_admission()

    def _hand_to_admission(self) -> None:
        try:
            self.host.enqueue(self)
        except Exception as error:
            self._fail_internally(error, "handing the run to admission")

    def _fail_internally(self, error: BaseException, doing: str) -> None:
        """The runtime's own bookkeeping failed: record it loudly and end the run."""
        _log.error("internal error while %s for task %r", doing, self.task_id, exc_info=error)
        self._failure = Failure(
            kind=FailureKind.EXCEPTION,
            message=storable_text(f"internal error while {doing}: {type(error).__name__}: {error}"),
            exception_type=storable_text(type(error).__name__),
            retryable=False,
        )
        status = self._record.status
        if status in _TERMINAL:
            return
        self._leave_waiting(status)
        current = self._current
        if current is not None:
            self._current = None  # its later report is not trusted
            current.request_stop(0.0)  # the carrier may still run; tell it to end
        for step in _path_to(status, _S.FAILED)[1:]:
            try:
                self._move(step, Trigger.INTERNAL_ERROR, reason=doing)
            except Exception:
                _log.exception("could not record the internal error of %r", self.task_id)
                return
        self._give_back_slot()

    def _give_back_slot(self) -> None:
        if self._holds_slot:
            self._holds_slot = False
            try:
                self.host.release(self)
            except Exception:
                _log.exception("host failed to release the slot of %r", self.task_id)

    def _leave_waiting(self, status: TaskStatus) -> None:
        if status is _S.QUEUED:
            if self._start_timer is not None:
                self._start_timer.cancel()
                self._start_timer = None
            self.host.withdraw(self)
        elif status is _S.RETRY_WAIT and self._retry_timer is not None:
            self._retry_timer.cancel()
            self._retry_timer = None

    def _arm_start_timer(self) -> None:
        timeout = self.timeout
        if timeout is None or timeout.start is None or self._record.attempt > 0:
            return
        loop = asyncio.get_running_loop()
        self._start_timer = loop.call_later(timeout.start, self._start_timed_out)

    def _start_timed_out(self) -> None:
        """Submission to a real start took longer than ``Timeout.start``: final."""
        self._start_timer = None
        status = self._record.status
        if status is _S.QUEUED:
            self.host.withdraw(self)
        elif status is _S.STARTING:
            current = self._current
            if current is None or not current.abandon_start():
                return  # the function began just now: it runs
            self._current = None
        else:
            return
        assert self.timeout is not None
        assert self.timeout.start is not None
        self._failure = Failure(
            kind=FailureKind.TIMEOUT_START,
            message=f"not started within {self.timeout.start:g}s of submission",
            retryable=False,  # a task that never started cannot go to retry_wait: final
        )
        try:
            self._move(_S.FAILED, Trigger.START_TIMEOUT)
        finally:
            self._give_back_slot()

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
        actor = _check_actor(actor)
        return self._request_stop(Trigger.USER_STOP, actor=actor, reason=reason)

    def shutdown(self, reason: str) -> bool:
        """The host is closing: stop like :meth:`stop`, recorded as the runtime's doing."""
        return self._request_stop(Trigger.SHUTDOWN, actor="system", reason=reason)

    def _request_stop(self, trigger: str, *, actor: str, reason: str | None) -> bool:
        status = self._record.status
        if status in _TERMINAL or status is _S.STOPPING:
            return False
        if status in _NOT_STARTED:
            self._leave_waiting(status)
            self._move(_S.STOPPED, trigger, actor=actor, reason=reason)
            return True
        self._stop_reason = reason
        self._move(_S.STOPPING, trigger, actor=actor, reason=reason)
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        current = self._current
        if current is not None:
            current.request_stop(self.windows.stop_grace)
        return True

    async def pause(self, *, actor: str = "user", reason: str | None = None) -> bool:
        """Ask the task to pause at its next checkpoint.

        Returns ``True`` once it is paused. When no checkpoint is reached
        within the pause window the state rolls back to ``running`` and the
        result is ``False`` — never a pretend pause. A paused task keeps its
        concurrency slot. Cancelling the caller does not cancel the pause.
        """
        reason = check_reason(reason)
        actor = _check_actor(actor)
        status = self._record.status
        if status is _S.PAUSED:
            return True
        if status is _S.PAUSING and self._pause_waiter is not None:
            return await asyncio.shield(self._pause_waiter)
        current = self._current
        if status is not _S.RUNNING or current is None:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._pause_waiter = waiter
        self._move(_S.PAUSING, Trigger.USER_PAUSE, actor=actor, reason=reason)
        current.signals.request_pause()
        self._pause_timer = loop.call_later(self.windows.pause_window, self._pause_window_over)
        return await asyncio.shield(waiter)

    def _pause_window_over(self) -> None:
        self._pause_timer = None
        if self._record.status is not _S.PAUSING:
            return
        current = self._current
        if current is not None:
            current.signals.withdraw_pause()
        self._move(_S.RUNNING, Trigger.PAUSE_NOT_REACHED)

    def _settle_pause(self, paused: bool) -> None:
        waiter = self._pause_waiter
        self._pause_waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result(paused)

    async def resume(self, *, actor: str = "user", reason: str | None = None) -> bool:
        """Resume a paused (or pausing) task. Returns whether it was resumed."""
        reason = check_reason(reason)
        actor = _check_actor(actor)
        status = self._record.status
        current = self._current
        if status not in (_S.PAUSED, _S.PAUSING) or current is None:
            return False
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        self._move(_S.RUNNING, Trigger.USER_RESUME, actor=actor, reason=reason)
        current.signals.withdraw_pause()
        if status is _S.PAUSED:
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
        # The end is reported once the store holds it (or the store fails: then
        # ``persist_failures`` says the write is pending).
        if self._record.finished is not None:
            settled = self.host.settled(self)
            if settled is not None:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(settled)
        else:
            if self._done is None:
                self._done = asyncio.get_running_loop().create_future()
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._done)
                settled = self.host.settled(self)
                if settled is not None:
                    await asyncio.shield(settled)
        outcome = self.outcome
        assert outcome is not None
        return outcome

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
            await host.aclose(timeout=self.windows.cancel_window)
            return
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
        record = self._record
        return f"<TaskRun {self.task_id!r} {self.name!r} {record.status.value} v{record.version}>"


def check_tags(tags: Collection[str]) -> frozenset[str]:
    """Tags as a frozenset of non-empty strings; a bare string is refused."""
    if isinstance(tags, str):
        raise ConfigurationError("tags must be a collection of strings, not a single string")
    result = frozenset(tags)
    for tag in result:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"tags must be non-empty strings, got {tag!r}")
        check_reason(tag, "tag")
    return result


def _check_actor(actor: object) -> str:
    if not isinstance(actor, str) or not actor:
        raise PayloadError("actor", f"must be a non-empty string, got {actor!r}")
    return check_reason(actor, "actor") or actor


def _call_done_callback(callback: Callable[[TaskRun], None], run: TaskRun) -> None:
    try:
        callback(run)
    except Exception:
        _log.exception("a done callback of task %r raised", run.task_id)


def _path_to(start: TaskStatus, goal: TaskStatus) -> list[TaskStatus]:
    """The shortest legal path through the table (``[start]`` if there is none)."""
    paths: deque[list[TaskStatus]] = deque([[start]])
    seen = {start}
    while paths:
        path = paths.popleft()
        if path[-1] is goal:
            return path
        for step in sorted(TRANSITIONS[path[-1]], key=lambda s: s.value):
            if step not in seen:
                seen.add(step)
                paths.append([*path, step])
    return [start]
