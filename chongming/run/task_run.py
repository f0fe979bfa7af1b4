"""``TaskRun``: one task's state machine and the handle to control it."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from chongming.clock import SYSTEM_CLOCK, Clock
from chongming.errors import ConfigurationError, InvalidTransition, PayloadError
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.attempt import Attempt
from chongming.run.defaults import (
    DEFAULT_RETRY,
    DEFAULT_WINDOWS,
    default_artifact_root,
    new_task_id,
    resolve_executor,
)
from chongming.run.history import STATUS_VALUE, Step, extend_records
from chongming.run.host import RunHost, StandaloneHost
from chongming.run.outcome import Outcome
from chongming.run.verdict import Verdict, VerdictKind
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_arguments,
    check_label,
    check_task_id,
)
from chongming.state.records import Failure, FailureKind, JsonValue, Progress, TaskSnapshot
from chongming.state.records import Transition as TransitionRecord
from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS
from chongming.state.triggers import Trigger
from chongming.task_api.spec import TaskSpec, spec_for

__all__ = ["TaskRun"]

_S = TaskStatus
_NOT_STARTED = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})


class TaskRun:
    """The handle of one task: its state, its history and the ways to act on it.

    Used alone as ``async with TaskRun(fn, args) as run: ...`` (or through
    :func:`run_task`), or created by a :class:`Controller`, which owns it.
    Every status change goes through one method that checks the transition
    table, bumps ``status_version`` by one and appends a transition.
    """

    __slots__ = (
        "_attempt",
        "_created_at",
        "_current",
        "_done",
        "_done_callbacks",
        "_failure",
        "_finished_at",
        "_finished_mono",
        "_history",
        "_holds_slot",
        "_outcome",
        "_owns_host",
        "_pause_timer",
        "_pause_waiter",
        "_progress",
        "_queued_at",
        "_records",
        "_result",
        "_retry_timer",
        "_start_timer",
        "_started_at",
        "_started_mono",
        "_status",
        "_stop_reason",
        "_updated_at",
        "_version",
        "args",
        "artifact_root",
        "bucket",
        "bucket_key",
        "clock",
        "executor",
        "host",
        "kwargs",
        "label",
        "max_payload_bytes",
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
        tags: frozenset[str] | None = None,
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
        spec = fn if isinstance(fn, TaskSpec) else spec_for(fn)
        args = tuple(args)
        kwargs = dict(kwargs or {})
        spec.bind_check(args, kwargs)
        if args or kwargs:
            check_arguments(args, kwargs, max_payload_bytes)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
        if timeout is not None and not isinstance(timeout, Timeout):
            raise ConfigurationError(f"timeout must be a Timeout, got {type(timeout).__name__}")
        if bucket_key is not None and not isinstance(bucket_key, str):
            raise PayloadError("bucket_key", f"must be a string, got {type(bucket_key).__name__}")
        self.spec = spec
        self.task_id = new_task_id() if task_id is None else check_task_id(task_id)
        self.name = name or spec.name
        self.label = check_label(label) if label is not None else self.name
        self.args = args
        self.kwargs = kwargs
        self.retry = retry or spec.retry or DEFAULT_RETRY
        self.timeout = timeout or spec.timeout
        self.executor = resolve_executor(executor or spec.executor, spec)
        self.tags = spec.tags if tags is None else frozenset(tags)
        self.priority = spec.priority if priority is None else priority
        self.bucket = bucket
        self.bucket_key = bucket_key
        self.owner = owner
        self.windows = windows or DEFAULT_WINDOWS
        self.clock = clock or SYSTEM_CLOCK
        self.artifact_root = artifact_root or default_artifact_root()
        self.upstream = upstream
        self.max_payload_bytes = max_payload_bytes
        self._owns_host = host is None
        self.host: RunHost = host if host is not None else StandaloneHost()
        now = self.clock.now()
        self._status = _S.PENDING
        self._version = 0
        self._attempt = 0
        # History as plain tuples; Transition records are built when asked for.
        # Most runs are never inspected, and this is the hot path.
        self._history: tuple[Step, ...] = ()
        self._records: list[TransitionRecord] | None = None
        self._created_at = now
        self._updated_at = now
        self._queued_at: datetime | None = None
        self._started_at: datetime | None = None
        self._finished_at: datetime | None = None
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
        return self._status

    @property
    def status_version(self) -> int:
        return self._version

    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def transitions(self) -> tuple[TransitionRecord, ...]:
        """The history so far, oldest first (a copy)."""
        return tuple(self._materialise())

    @property
    def last_transition(self) -> TransitionRecord:
        return self._materialise()[-1]

    def transitions_since(self, version: int) -> list[TransitionRecord]:
        """Transitions with a version above ``version``, oldest first."""
        return self._materialise()[version:]

    def _materialise(self) -> list[TransitionRecord]:
        records = self._records
        if records is None:
            records = self._records = []
        extend_records(self.task_id, self._history, records)
        return records

    @property
    def done(self) -> bool:
        return self._finished_at is not None

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
    def holds_slot(self) -> bool:
        return self._holds_slot

    @property
    def snapshot(self) -> TaskSnapshot:
        """The latest state as a frozen record."""
        heartbeat: datetime | None = None
        current = self._current
        if current is not None and current.context is not None:
            age = time.monotonic() - current.signals.heartbeat
            heartbeat = self.clock.now() - timedelta(seconds=max(0.0, age))
        return TaskSnapshot(
            task_id=self.task_id,
            name=self.name,
            label=self.label,
            status=self._status,
            status_version=self._version,
            attempt=self._attempt,
            max_attempts=self.retry.max_attempts,
            created_at=self._created_at,
            updated_at=self._updated_at,
            bucket=self.bucket,
            bucket_key=self.bucket_key,
            tags=self.tags,
            priority=self.priority,
            owner=self.owner,
            queued_at=self._queued_at,
            started_at=self._started_at,
            finished_at=self._finished_at,
            last_heartbeat_at=heartbeat,
            progress=self._progress,
            failure=self._failure,
            result=self._result,
            args=self.args,
            kwargs=self.kwargs,
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
        current = self._status
        if target not in TRANSITIONS[current]:
            raise InvalidTransition(current, target)
        now = self.clock.now()
        self._version += 1
        # A tuple of tuples of atomic values: once the garbage collector has
        # seen it, it stops tracking it (a list would be traversed forever).
        version, attempt = self._version, self._attempt
        step = (
            version,
            STATUS_VALUE[current],
            STATUS_VALUE[target],
            now,
            trigger,
            actor,
            reason,
            attempt,
        )
        self._history += (step,)
        self._status = target
        self._updated_at = now
        if target is _S.QUEUED and self._queued_at is None:
            self._queued_at = now
        elif target is _S.RUNNING and self._started_at is None:
            self._started_at = now
            self._started_mono = time.monotonic()
        if current is _S.PAUSING and target is not _S.PAUSED:
            self._settle_pause(False)
        self.host.record(self, current)
        if target in _TERMINAL:
            self._finish(now)

    def _finish(self, now: datetime) -> None:
        self._finished_at = now
        self._finished_mono = time.monotonic()
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
                callback(self)

    def _build_outcome(self) -> Outcome:
        elapsed = 0.0
        if self._started_mono is not None and self._finished_mono is not None:
            elapsed = self._finished_mono - self._started_mono
        return Outcome(
            task_id=self.task_id,
            status=self._status,
            value=self._result if self._status is _S.SUCCEEDED else None,
            failure=self._failure,
            attempts=self._attempt,
            elapsed=elapsed,
        )

    def add_done_callback(self, callback: Callable[[TaskRun], None]) -> None:
        """Call ``callback(run)`` once the run has ended (at once if it has)."""
        if self._finished_at is not None:
            callback(self)
        elif self._done_callbacks is None:
            self._done_callbacks = [callback]
        else:
            self._done_callbacks.append(callback)

    # -- lifecycle driven by the host ---------------------------------------------

    def submit(self) -> None:
        """``pending -> queued`` and hand the run to its host's admission."""
        self._move(_S.QUEUED, Trigger.DEPENDENCIES_RESOLVED)
        self._arm_start_timer()
        self.host.enqueue(self)

    def block(self) -> None:
        """``pending -> blocked``: a pipeline node waiting for its upstreams."""
        self._move(_S.BLOCKED, Trigger.WAITING_FOR_DEPENDENCIES)

    def unblock(self, upstream: Mapping[str, JsonValue] | None = None) -> None:
        """``blocked -> queued`` once the join condition holds."""
        if upstream is not None:
            self.upstream = upstream
        self.submit()

    def skip(self, reason: str) -> bool:
        """``blocked -> skipped``: it was never meant to run."""
        if self._status is not _S.BLOCKED:
            return False
        self._move(_S.SKIPPED, Trigger.UPSTREAM_FAILED, reason=reason)
        return True

    def cancel(self, reason: str, trigger: str = Trigger.FAIL_FAST) -> bool:
        """Orchestration cascade: ``cancelled`` if not started, else a stop."""
        status = self._status
        if status in (_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT):
            self._leave_waiting(status)
            self._move(_S.CANCELLED, trigger, reason=reason)
            return True
        return self._request_stop(trigger, actor="system", reason=reason)

    def dispatch(self) -> bool:
        """``queued -> starting`` and launch the attempt; False if no longer queued."""
        if self._status is not _S.QUEUED:
            return False
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        self._attempt += 1
        self._holds_slot = True
        self._move(_S.STARTING, Trigger.DISPATCH)
        attempt = Attempt(self, self._attempt, self.executor)
        self._current = attempt
        attempt.launch()
        return True

    def begin_attempt(self, attempt: Attempt) -> None:
        """The carrier is calling the function: ``starting -> running``.

        A stop that arrived while the attempt was starting stays in force
        (``stopping``); the function sees it at its first checkpoint.
        """
        if attempt is self._current and self._status is _S.STARTING:
            self._move(_S.RUNNING, Trigger.LAUNCHED)

    def end_attempt(self, attempt: Attempt, verdict: Verdict) -> None:
        """Record what the attempt's verdict says, then free its slot."""
        if attempt is not self._current or self._status in _TERMINAL:
            return
        self._current = None
        status = self._status
        if verdict.kind is VerdictKind.SUCCEEDED:
            self._result = verdict.value
            self._failure = None  # an earlier attempt's failure is history, not the outcome
            self._move(_S.SUCCEEDED, Trigger.COMPLETED)
        elif verdict.kind is VerdictKind.STOPPED:
            if status is not _S.STOPPING:
                self._move(_S.STOPPING, Trigger.SHUTDOWN, reason="the host is closing")
            self._move(_S.STOPPED, Trigger.STOP_CONFIRMED, reason=self._stop_reason)
        elif verdict.kind is VerdictKind.LOST:
            self._failure = verdict.failure
            trigger = Trigger.STOP_ABANDONED if status is _S.STOPPING else Trigger.TIMEOUT_ABANDONED
            self._move(_S.LOST, trigger, reason=self._stop_reason)
        else:
            self._record_failure(attempt, verdict)
        self._give_back_slot()

    def _record_failure(self, attempt: Attempt, verdict: Verdict) -> None:
        failure = verdict.failure
        assert failure is not None
        self._failure = failure
        trigger = (
            Trigger.RESULT_INVALID if failure.kind is FailureKind.RESULT_INVALID else Trigger.FAILED
        )
        if self._status is _S.STOPPING:
            self._move(_S.FAILED, trigger, reason=self._stop_reason)
            return
        decision = self.retry.decide(attempt.number, failure, verdict.error, random.random())
        if not decision.retry:
            self._move(_S.FAILED, trigger)
            return
        self._move(_S.RETRY_WAIT, Trigger.RETRY_SCHEDULED, reason=failure.message[:200])
        loop = asyncio.get_running_loop()
        self._retry_timer = loop.call_later(decision.delay, self._retry_due)

    def _retry_due(self) -> None:
        self._retry_timer = None
        if self._status is _S.RETRY_WAIT:
            self._move(_S.QUEUED, Trigger.RETRY_DUE)
            self.host.enqueue(self)

    def _give_back_slot(self) -> None:
        if self._holds_slot:
            self._holds_slot = False
            self.host.release(self)

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
        if timeout is None or timeout.start is None or self._attempt > 0:
            return
        loop = asyncio.get_running_loop()
        self._start_timer = loop.call_later(timeout.start, self._start_timed_out)

    def _start_timed_out(self) -> None:
        self._start_timer = None
        if self._status is not _S.QUEUED:
            return
        self.host.withdraw(self)
        assert self.timeout is not None
        assert self.timeout.start is not None
        self._failure = Failure(
            kind=FailureKind.TIMEOUT_START,
            message=f"not started within {self.timeout.start:g}s of submission",
            retryable=False,  # a queued task cannot go to retry_wait: this is final
        )
        self._move(_S.FAILED, Trigger.START_TIMEOUT)

    def report_progress(self, progress: Progress) -> None:
        """Hot path from ``ctx.progress``; may run on a worker thread."""
        self._progress = progress

    # -- control -------------------------------------------------------------------

    async def stop(self, *, reason: str | None = None, actor: str = "user") -> bool:
        """Ask the task to stop. Returns whether a request was issued.

        A task that has not started ends ``stopped`` at once. A running task
        goes to ``stopping`` and ends ``stopped`` only once it really ended:
        at its next checkpoint, or when its grace window runs out (a
        coroutine is then cancelled; a thread is abandoned and recorded
        ``lost``). Use :meth:`wait` to see the end.
        """
        return self._request_stop(Trigger.USER_STOP, actor=actor, reason=reason)

    def shutdown(self, reason: str) -> bool:
        """The host is closing: stop like :meth:`stop`, recorded as the runtime's doing."""
        return self._request_stop(Trigger.SHUTDOWN, actor="system", reason=reason)

    def _request_stop(self, trigger: str, *, actor: str, reason: str | None) -> bool:
        status = self._status
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
        status = self._status
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

    def pause_reached(self, attempt: Attempt) -> None:
        if attempt is not self._current or self._status is not _S.PAUSING:
            return
        if not attempt.signals.pause_requested:
            return
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        attempt.suspend_clock()
        self._move(_S.PAUSED, Trigger.PAUSE_REACHED)
        self._settle_pause(True)

    def _pause_window_over(self) -> None:
        self._pause_timer = None
        if self._status is not _S.PAUSING:
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
        status = self._status
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
        if timeout is not None and (not isinstance(timeout, int | float) or timeout < 0):
            raise ConfigurationError(f"timeout must be a number >= 0, got {timeout!r}")
        if self._finished_at is not None:
            return self._build_outcome() if self._outcome is None else self._outcome
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        if timeout is None:
            await asyncio.shield(self._done)
        else:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._done)
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
            return  # the common case: nothing left to stop or await
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
        return f"<TaskRun {self.task_id!r} {self.name!r} {self._status.value} v{self._version}>"


_TERMINAL = frozenset(s for s in TaskStatus if s.is_terminal)
