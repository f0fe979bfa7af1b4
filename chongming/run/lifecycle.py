"""A run's lifecycle: what its host and its attempts drive (the handle is ``TaskRun``).

Status, version and history live on the run itself; ``_move`` is their one
writer, one call per transition: table check, version + 1, attempt + 1 on
entering ``starting`` (unless a park or a resume queued the task: see
:mod:`chongming.state.attempts`), one history step appended, stamps, the
host's counts, its sink (write-through and observers, composed once per host),
and on a terminal status the end finished inline. It is the rule of
:func:`~chongming.state.machine.apply_transition`; a property test folds
random walks through both. Each attempt is an
:class:`~chongming.run.attempt.Attempt` that sees the run only as its listener.

**Every attempt ends.** Whatever user-supplied code does (a retry predicate
that raises, a done callback that raises, a function that returns while a
helper of it is parked at a checkpoint), the run reaches a legal state and its
slot is given back exactly once. A failure of the runtime's own bookkeeping is
recorded on the run (``failed``, kind ``exception``, naming what failed).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from chongming.clock import SYSTEM_CLOCK, Clock, to_datetime
from chongming.errors import InvalidTransition, PayloadError
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.abnormal_ends import fail_internally, start_timed_out
from chongming.run.arguments import check_actor as check_actor
from chongming.run.arguments import check_run_options
from chongming.run.arguments import check_tags as check_tags
from chongming.run.attempt import Attempt
from chongming.run.defaults import DEFAULT_RETRY, DEFAULT_WINDOWS, default_artifact_root
from chongming.run.defaults import new_task_id as new_task_id
from chongming.run.hand_back import give_back, hand_back, hand_back_ended
from chongming.run.history import STATUS_VALUE, Step, extend_records, steps_from
from chongming.run.host import RunHost, StandaloneHost
from chongming.run.outcome import Outcome, call_done_callback
from chongming.run.plan import AttemptInputs, AttemptPlan, plan_for
from chongming.run.statuses import (
    BLOCKED,
    CANCELLED,
    PAUSED,
    PAUSING,
    PENDING,
    QUEUED,
    RETRY_WAIT,
    RUNNING,
    SKIPPED,
    STARTING,
    STOPPED,
    STOPPING,
    SUCCEEDED,
)
from chongming.run.verdict import Verdict, VerdictKind, describe_error, storable_text
from chongming.state.attempts import CONTINUES_ATTEMPT
from chongming.state.ids import random_bits
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_label,
    check_task_id,
    json_form_arguments,
)
from chongming.state.records import Failure, FailureKind, JsonValue, Progress, TaskSnapshot
from chongming.state.records import Transition as TransitionRecord
from chongming.state.status import TaskStatus
from chongming.state.steps import RELEASED_WHILE_PAUSED, End, Then, asks_retry, steps_for
from chongming.state.table import TRANSITIONS
from chongming.state.triggers import Trigger
from chongming.task_api.spec import TaskSpec, spec_for

_log = logging.getLogger("chongming.run")
_NOT_STARTED = frozenset({PENDING, BLOCKED, QUEUED, RETRY_WAIT})
_TERMINAL = frozenset(s for s in TaskStatus if s.is_terminal)
_ALLOWED = dict(TRANSITIONS)  # a plain dict reads faster than the public read-only view
_V_SUCCEEDED = VerdictKind.SUCCEEDED
_ENDS = {kind: End(kind.value) for kind in VerdictKind}


__all__ = ["RunLifecycle", "call_done_callback", "check_actor", "check_tags"]


class RunLifecycle:
    """The state of one run and everything that moves it, except the user's handle.

    The host (admission) and the current attempt drive it; :class:`TaskRun`
    adds what users call. Validation happens here, before anything is built.
    """

    __slots__ = (
        "_created_at",
        "_current",
        "_done",
        "_done_callbacks",
        "_failure",
        "_finished_at",
        "_finished_mono",
        "_handing_back",
        "_history",
        "_holds_slot",
        "_inputs",
        "_left",
        "_outcome",
        "_owns_host",
        "_pause_timer",
        "_pause_waiter",
        "_plan",
        "_progress",
        "_queued_at",
        "_records",
        "_result",
        "_retry_timer",
        "_start_timer",
        "_started_at",
        "_started_mono",
        "_stop_reason",
        "_time",
        "_updated_at",
        "adopted",
        "attempt",
        "bucket",
        "bucket_key",
        "caller_context",
        "host",
        "label",
        "name",
        "owner",
        "priority",
        "retry",
        "spec",
        "status",
        "status_version",
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
        if type(args) is not tuple:
            args = tuple(args)
        kwargs = dict(kwargs) if kwargs else {}
        spec.bind_check(args, kwargs)
        if args or kwargs:
            args, kwargs = json_form_arguments(args, kwargs, max_payload_bytes)
        if retry is not None or timeout is not None or priority is not None:
            check_run_options(retry, timeout, None, priority)
        if windows is not None and not isinstance(windows, ControlWindows):
            check_run_options(None, None, windows, None)  # raises, naming the type
        if bucket_key is not None and not isinstance(bucket_key, str):
            raise PayloadError("bucket_key", f"must be a string, got {type(bucket_key).__name__}")
        self.host: RunHost = host if host is not None else StandaloneHost()
        self._owns_host = host is None
        self.spec = spec
        # new_task_id(), inline: 16 hex digits of 64 random bits.
        self.task_id = "%016x" % random_bits(64) if task_id is None else check_task_id(task_id)  # noqa: UP031
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
        #: The submitter's context variables (a request id, a log binding, a span), as
        #: ``asyncio.create_task`` would take them: each attempt runs in a copy of it.
        self.caller_context = contextvars.copy_context()
        self._plan: AttemptPlan = plan_for(
            name=self.name,
            fn=spec.fn,
            # A coroutine runs on the loop, whatever was chosen (see resolve_executor).
            executor=None
            if spec.is_coroutine
            else self.host.executor_for(executor or spec.executor, spec),
            timeout=self.timeout,
            windows=self.windows,
            artifact_root=artifact_root or default_artifact_root(),
            max_payload_bytes=max_payload_bytes,
        )
        self._inputs = AttemptInputs(self.task_id, args, kwargs, upstream)
        # The system clock read without its wrapper: one call less per transition.
        self._time = time.time if clock is None or clock is SYSTEM_CLOCK else clock.time
        # Status, version, attempt number, stamps and history: written by ``_move`` only.
        self.status: TaskStatus = PENDING
        self.status_version = 0
        self.attempt = 0
        #: Compact steps (``run/history.py``), appended to: never a rebuilt tuple.
        self._history: list[Step] = []
        self._records: list[TransitionRecord] | None = None
        self._created_at = self._updated_at = self._time()
        self._queued_at: float | None = None
        self._started_at: float | None = None
        self._finished_at: float | None = None
        #: The stored snapshot of a task claimed from the queue (None: made here).
        self.adopted: TaskSnapshot | None = None
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
        self._done_callbacks: list[Callable[[Any], None]] | None = None
        self._outcome: Outcome | None = None
        #: Why a closing worker hands this run back (set by :meth:`hand_back`).
        self._handing_back: str | None = None
        #: Resolved once this node is done with the run: it ended, or went back to the queue.
        self._left: asyncio.Future[None] | None = None

    # -- reading -----------------------------------------------------------------

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
        return tuple(self._transition_records())

    @property
    def last_transition(self) -> TransitionRecord:
        return self._transition_records()[-1]

    def transitions_since(self, version: int) -> list[TransitionRecord]:
        """Transitions with a version above ``version``, oldest first."""
        return self._transition_records()[version:]

    def _transition_records(self) -> list[TransitionRecord]:
        """The history as records, oldest first (built once, extended as it grows)."""
        records = self._records
        if records is None:
            records = self._records = []
        extend_records(self.task_id, self._history, records)
        return records

    @property
    def done(self) -> bool:
        return self._finished_at is not None

    @property
    def holds_slot(self) -> bool:
        return self._holds_slot

    @property
    def retry_due_at(self) -> float | None:
        """When the backoff of this run's ``retry_wait`` ends (its clock's seconds), else None.

        A closing worker hands a claimed task waiting for its retry back to
        the queue with this as its ``not_before``.
        """
        timer = self._retry_timer
        if timer is None or self.status is not RETRY_WAIT:
            return None
        return self._time() + max(0.0, timer.when() - asyncio.get_running_loop().time())

    @property
    def progress(self) -> Progress | None:
        return self._progress

    def heartbeat_at(self) -> float | None:
        """Epoch seconds of the current attempt's last checkpoint (None between attempts)."""
        current = self._current
        if current is None or current.context is None:
            return None
        return self._time() - current.signals.heartbeat_age()

    # -- the one place that changes status ------------------------------------------

    def _move(
        self,
        target: TaskStatus,
        trigger: str,
        *,
        actor: str = "system",
        reason: str | None = None,
    ) -> None:
        """Apply ``status -> target``, the one call per transition; see the module docstring.

        Raises :class:`InvalidTransition` (changing nothing) when the table forbids it.
        """
        previous = self.status
        if target not in _ALLOWED[previous]:
            raise InvalidTransition(previous, target)
        now = self._time()
        version = self.status_version = self.status_version + 1
        history = self._history
        if target is STARTING and (not history or history[-1][4] not in CONTINUES_ATTEMPT):
            self.attempt += 1
        history.append(
            (
                version,
                STATUS_VALUE[previous],
                STATUS_VALUE[target],
                now,
                trigger,
                actor,
                reason,
                self.attempt,
            )
        )
        self.status = target
        self._updated_at = now
        terminal = target in _TERMINAL
        if target is QUEUED:
            if self._queued_at is None:
                self._queued_at = now
        elif target is RUNNING:
            if self._started_at is None:
                self._started_at = now
            if self._started_mono is None:
                self._started_mono = asyncio.get_running_loop().time()
        elif terminal:
            self._finished_at = now
        if previous is PAUSING and target is not PAUSED:
            self._settle_pause(False)
        host = self.host
        counts = host.per_status
        counts[previous] -= 1
        counts[target] += 1
        sink = host.sink
        try:
            if sink is not None:
                sink(self, previous)
            elif terminal:
                host.retire(self)
        except Exception:
            # The host's bookkeeping is ours; a bug there must not strand the run.
            _log.exception("host failed to record %s -> %s of %r", previous, target, self.task_id)
        if terminal:
            self._finish()

    def _finish(self) -> None:
        self._finished_mono = asyncio.get_running_loop().time()
        if self._left is not None and not self._left.done():
            self._left.set_result(None)
        if (
            self._start_timer is not None
            or self._retry_timer is not None
            or self._pause_timer is not None
        ):
            self.discard()
        if self._done is not None and not self._done.done():
            self._done.set_result(None)
        callbacks = self._done_callbacks
        if callbacks is not None:
            self._done_callbacks = None
            for callback in callbacks:
                call_done_callback(callback, self)

    # -- lifecycle driven by the host ---------------------------------------------

    def submit(self) -> None:
        """``pending -> queued`` and hand the run to its host's admission."""
        self._move(QUEUED, Trigger.DEPENDENCIES_RESOLVED)  # mark_queued, inline
        if self.timeout is not None:
            self._arm_start_timer()
        try:
            self.host.enqueue(self)  # _hand_to_admission, inline
        except Exception as error:
            fail_internally(self, error, "handing the run to admission")

    def mark_queued(self) -> None:
        """``pending -> queued`` without admission yet (the host first makes it durable)."""
        self._move(QUEUED, Trigger.DEPENDENCIES_RESOLVED)
        self._arm_start_timer()

    def adopt(self, stored: TaskSnapshot, history: Sequence[TransitionRecord]) -> None:
        """Take over a queued task the store holds (claimed from the queue), at its version.

        The run continues the stored trajectory: its next transition is the
        stored version plus one, and its snapshot keeps the stored recipe
        fields (version, earliest start, idempotency key). A task its claim
        started is adopted at ``starting``: admission launches it as it is.
        """
        if [t.version for t in history] != list(range(1, stored.status_version + 1)):
            raise ValueError(
                f"the stored history of {stored.task_id!r} does not lead to version "
                f"{stored.status_version}"
            )
        self.status = stored.status
        self.status_version = stored.status_version
        self.attempt = stored.attempt
        self._history = steps_from(history)
        self._records = list(history)  # as stored: later transitions extend it
        self._created_at = stored.created_at.timestamp()
        self._updated_at = stored.updated_at.timestamp()
        self._queued_at = None if stored.queued_at is None else stored.queued_at.timestamp()
        self._started_at = None if stored.started_at is None else stored.started_at.timestamp()
        self._finished_at = None
        self.adopted = stored
        self._arm_start_timer()

    def enter_admission(self) -> None:
        """Hand a queued run to admission (a no-op if it left ``queued`` meanwhile)."""
        if self.status is QUEUED or self._claimed_start():
            self._hand_to_admission()

    def _claimed_start(self) -> bool:
        """Adopted at ``starting`` (its claim started it) and not launched yet."""
        return self.status is STARTING and self._current is None and not self._holds_slot

    def discard(self) -> None:
        """The host refused this run after all (its creation failed), or it ended: no timers."""
        for timer in (self._start_timer, self._retry_timer, self._pause_timer):
            if timer is not None:
                timer.cancel()
        self._start_timer = self._retry_timer = self._pause_timer = None

    def block(self) -> None:
        """``pending -> blocked``: a pipeline node waiting for its upstreams."""
        self._move(BLOCKED, Trigger.WAITING_FOR_DEPENDENCIES)

    def unblock(self, upstream: Mapping[str, JsonValue] | None = None) -> None:
        """``blocked -> queued`` once the join condition holds."""
        if upstream is not None:
            self.upstream = upstream
            self._inputs = self._inputs._replace(upstream=upstream)
        self.submit()

    def skip(self, reason: str) -> bool:
        """``blocked -> skipped``: it was never meant to run."""
        if self.status is not BLOCKED:
            return False
        self._move(SKIPPED, Trigger.UPSTREAM_FAILED, reason=reason)
        return True

    def cancel(self, reason: str, trigger: str = Trigger.FAIL_FAST, actor: str = "system") -> bool:
        """Orchestration cascade: ``cancelled`` if not started, else a stop."""
        status = self.status
        if status in _NOT_STARTED:
            self._leave_waiting(status)
            self._move(CANCELLED, trigger, actor=actor, reason=reason)
            return True
        return self._request_stop(trigger, actor=actor, reason=reason)

    def dispatch(self) -> bool:
        """``queued -> starting`` and launch the attempt; False if no longer queued.

        The start timeout stays armed until the function really begins: a
        task waiting for a worker thread has not started.
        """
        if self.status is QUEUED:
            self._holds_slot = True
            self._move(STARTING, Trigger.DISPATCH)
        elif self._claimed_start():
            self._holds_slot = True  # the claim wrote ``starting``: launch it as it is
        else:
            return False
        host = self.host
        gate = host.launch_gate(self)
        attempt = Attempt(self._plan, self._inputs, self.attempt, self, gate)
        self._current = attempt
        try:
            attempt.task = host.spawn(self, attempt.drive())  # attempt.launch(), inline
        except Exception as error:
            self._current = None
            fail_internally(self, error, "launching the attempt")
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
        if self.status is STARTING:
            if self._started_mono is None:
                self._started_mono = attempt.started  # read on the loop's clock just now
            self._move(RUNNING, Trigger.LAUNCHED)

    def attempt_paused(self, attempt: Attempt, generation: int) -> None:
        """A checkpoint parked for pause ``generation``; a stale receipt is ignored."""
        signals = attempt.signals
        if (
            attempt is not self._current
            or self.status is not PAUSING
            or not signals.pause_requested
            or generation != signals.pause_generation
        ):
            return
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        attempt.suspend_clock()
        self._move(PAUSED, Trigger.PAUSE_REACHED)
        self._settle_pause(True)

    def attempt_ended(self, attempt: Attempt, verdict: Verdict) -> None:
        """Record what the verdict says, then give the slot back (exactly once)."""
        if attempt is not self._current or self.status in _TERMINAL:
            return
        self._current = None
        try:
            if verdict.kind is _V_SUCCEEDED and self.status is not PAUSED:
                self._result = verdict.value  # _record_end's first case, inline
                self._failure = None  # an earlier attempt's failure is history
                self._move(SUCCEEDED, Trigger.COMPLETED)
            else:
                self._record_end(attempt, verdict)
        except (Exception, asyncio.CancelledError) as error:  # synchronous: never ours
            fail_internally(self, error, "recording the end of the attempt")
        finally:
            if self._holds_slot:  # _give_back_slot, inline
                self._holds_slot = False
                try:
                    self.host.release(self)
                except Exception:
                    _log.exception("host failed to release the slot of %r", self.task_id)

    def report_progress(self, progress: Progress) -> None:
        """Hot path from ``ctx.progress``; may run on a worker thread."""
        self._progress = progress

    def _record_end(self, attempt: Attempt, verdict: Verdict) -> None:
        """Gather the facts, then apply what :func:`~chongming.state.steps.steps_for` says."""
        status = self.status
        if status is PAUSED:
            # The function ended while parked elsewhere (a helper task or
            # thread sat at the checkpoint): release the pause, then say how.
            attempt.signals.withdraw_pause()
            attempt.resume_clock()
            target, trigger, reason = RELEASED_WHILE_PAUSED
            self._move(target, trigger, reason=reason)
            status = RUNNING
        end = _ENDS[verdict.kind]
        failure = verdict.failure
        if end is End.SUCCEEDED:
            self._result = verdict.value
            self._failure = None  # an earlier attempt's failure is history, not the outcome
        elif end is End.LOST:
            self._failure = failure
        elif end is End.FAILED:
            assert failure is not None
            self._failure = failure
            if failure.kind is FailureKind.RESULT_INVALID:
                end = End.RESULT_INVALID
        retry: bool | None = None
        gives_back = False
        delay = 0.0
        if failure is not None and asks_retry(status, end):
            try:
                decision = self.retry.decide(
                    attempt.number, failure, verdict.error, random.random()
                )
            except (Exception, asyncio.CancelledError) as error:
                # User code (a predicate, a backoff) raised; no await happens here, so
                # even a CancelledError is theirs, not a cancellation of ours: the
                # task fails, saying why.
                self._failure = Failure(
                    kind=FailureKind.EXCEPTION,
                    message=storable_text(
                        f"the retry policy raised {describe_error(error)} "
                        f"while judging: {failure.message}"
                    ),
                    exception_type=storable_text(type(error).__name__),
                    retryable=False,
                )
            else:
                retry, delay = decision.retry, decision.delay
                # A closing worker runs no retry: any other worker does, when it is due.
                gives_back = retry and (
                    self._handing_back is not None or self.host.hands_back(self)
                )
        moves, then = steps_for(
            status,
            end,
            retry=retry,
            stop_reason=self._stop_reason,
            note=verdict.note,
            handing_back=self._handing_back,
            gives_back=gives_back,
            failure_message="" if failure is None else failure.message,
        )
        for target, trigger, reason in moves:
            self._move(target, trigger, reason=reason)
        if then is Then.RETRY_LATER:
            loop = asyncio.get_running_loop()
            self._retry_timer = loop.call_later(delay, self._retry_due)
        elif then is Then.GIVE_BACK:
            give_back(self, self._time() + delay, Trigger.RETRY_RELEASED)
        elif then is Then.HAND_BACK:
            hand_back_ended(self, attempt)
        elif then is Then.PARK:
            parked = verdict.value
            assert isinstance(parked, dict)
            self._park(float(parked["wake_at"]), parked["fact"])

    def _park(self, wake_at: float, fact: Any) -> None:
        """A durable task's long sleep or wait: hand it back to the queue until ``wake_at``.

        ``-> retry_wait`` (``runtime:sleeping``), then ``-> queued``
        (``runtime:parked``) with no owner and the wake-up time as its earliest
        start, so any worker that serves it claims it then and replays it
        (sending the ``fact`` it waits for makes it claimable at once). The
        host lets go of the run once that is durable: a parked task costs a
        row, no slot, no memory here.
        """
        until = to_datetime(wake_at)
        waiting = "" if fact is None else f"fact {fact!r} or "
        self._move(RETRY_WAIT, Trigger.SLEEPING, reason=f"until {waiting}{until.isoformat()}")
        stored = self.adopted
        if stored is not None:
            self.adopted = dataclasses.replace(stored, not_before=until, owner=None)
        self.owner = None
        self._move(QUEUED, Trigger.PARKED, reason=f"claimable from {waiting}{until.isoformat()}")
        self.host.park(self, None if fact is None else str(fact))

    # -- a closing worker hands its claimed runs back (chongming/run/hand_back.py) ----

    @property
    def handed_back(self) -> bool:
        """Given back to the queue by this closing node (another worker may run it)."""
        return self.status is QUEUED and self._left is not None and self._left.done()

    def when_left(self) -> asyncio.Future[None]:
        """Resolved once this node is done with the run: it ended, or was handed back."""
        if self._left is None:
            self._left = asyncio.get_running_loop().create_future()
            if self._finished_at is not None:
                self._left.set_result(None)
        return self._left

    def hand_back(self, reason: str) -> bool:
        """The host is closing: give this claimed run back to the queue instead of stopping it.

        See :func:`chongming.run.hand_back.hand_back`.
        """
        return hand_back(self, reason)

    def _retry_due(self) -> None:
        self._retry_timer = None
        if self.status is RETRY_WAIT:
            self._move(QUEUED, Trigger.RETRY_DUE)
            self._hand_to_admission()

    def _hand_to_admission(self) -> None:
        try:
            self.host.enqueue(self)
        except Exception as error:
            fail_internally(self, error, "handing the run to admission")

    def _give_back_slot(self) -> None:
        if self._holds_slot:
            self._holds_slot = False
            try:
                self.host.release(self)
            except Exception:
                _log.exception("host failed to release the slot of %r", self.task_id)

    def _leave_waiting(self, status: TaskStatus) -> None:
        if status is QUEUED or self._claimed_start():
            if self._start_timer is not None:
                self._start_timer.cancel()
                self._start_timer = None
            self.host.withdraw(self)
        elif status is RETRY_WAIT and self._retry_timer is not None:
            self._retry_timer.cancel()
            self._retry_timer = None

    def _arm_start_timer(self) -> None:
        timeout = self.timeout
        first = 1 if self.status is STARTING else 0  # adopted at its claimed start
        if timeout is None or timeout.start is None or self.attempt > first:
            return
        loop = asyncio.get_running_loop()
        self._start_timer = loop.call_later(timeout.start, start_timed_out, self)

    def _request_stop(self, trigger: str, *, actor: str, reason: str | None) -> bool:
        status = self.status
        if status in _TERMINAL or status is STOPPING:
            return False
        if status in _NOT_STARTED:
            self._leave_waiting(status)
            self._move(STOPPED, trigger, actor=actor, reason=reason)
            return True
        if self._claimed_start():  # still waiting for a slot: nothing runs to wait for
            self._leave_waiting(status)
            self._move(STOPPING, trigger, actor=actor, reason=reason)
            self._move(STOPPED, Trigger.STOP_CONFIRMED, reason=reason)
            return True
        self._stop_reason = reason
        self._move(STOPPING, trigger, actor=actor, reason=reason)
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        current = self._current
        if current is not None:
            current.request_stop(self.windows.stop_grace)
        return True

    def _force_stop(self, trigger: str, *, actor: str, reason: str | None) -> bool:
        """Stop without waiting out the grace window (the carrier decides the outcome)."""
        requested = self._request_stop(trigger, actor=actor, reason=reason)
        current = self._current
        if self.status is STOPPING and current is not None:
            current.end_grace()
            return True
        return requested

    def _pause_window_over(self) -> None:
        self._pause_timer = None
        if self.status is not PAUSING:
            return
        current = self._current
        if current is not None:
            current.signals.withdraw_pause()
        self._move(RUNNING, Trigger.PAUSE_NOT_REACHED)

    def _settle_pause(self, paused: bool) -> None:
        waiter = self._pause_waiter
        self._pause_waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result(paused)
