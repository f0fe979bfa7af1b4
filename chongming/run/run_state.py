"""A run's state and its one writer: ``RunState._move``, one call per transition.

Status, version and history live on the run itself; ``_move`` is their one
writer: table check, version + 1, attempt + 1 on entering ``starting``
(unless a park or a resume queued the task: see
:mod:`chongming.state.attempts`), one history step appended, stamps, the
host's counts, its sink (write-through and observers, composed once per host),
and on a terminal status the end finished inline. It is the rule of
:func:`~chongming.state.machine.apply_transition`; a property test folds
random walks through both. What moves the run (its host and its attempts) is
:class:`~chongming.run.lifecycle.RunLifecycle`; what users call,
:class:`~chongming.run.task_run.TaskRun`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from chongming.clock import SYSTEM_CLOCK, Clock
from chongming.errors import InvalidTransition, PayloadError
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.arguments import check_run_options, check_tags
from chongming.run.attempt import Attempt
from chongming.run.defaults import DEFAULT_RETRY, DEFAULT_WINDOWS, default_artifact_root
from chongming.run.history import STATUS_VALUE, Step, extend_records
from chongming.run.host import RunHost, StandaloneHost
from chongming.run.outcome import Outcome, call_done_callback
from chongming.run.plan import AttemptInputs, AttemptPlan, plan_for
from chongming.run.statuses import (
    PAUSED,
    PAUSING,
    PENDING,
    QUEUED,
    RETRY_WAIT,
    RUNNING,
    STARTING,
)
from chongming.state.attempts import CONTINUES_ATTEMPT
from chongming.state.ids import random_bits
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_label,
    check_task_id,
    json_form_arguments,
)
from chongming.state.records import Failure, JsonValue, Progress, TaskSnapshot
from chongming.state.records import Transition as TransitionRecord
from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS
from chongming.task_api.signals import loop_clock
from chongming.task_api.spec import TaskSpec, spec_for

_NEW_TUPLE = tuple.__new__
_log = logging.getLogger("chongming.run")
_TERMINAL = frozenset(s for s in TaskStatus if s.is_terminal)
#: What an ended run holds instead of its submitter's context (one, shared, empty).
_SPENT_CONTEXT = contextvars.Context()
_ALLOWED = dict(TRANSITIONS)  # a plain dict reads faster than the public read-only view


__all__ = ["RunState"]


class RunState:
    """The state of one run: what it is, what it holds, and the one call that moves it.

    Validation happens here, before anything is built: a refused run leaves
    nothing behind.
    """

    __slots__ = (
        "_created_at",
        "_current",
        "_done_callbacks",
        "_failure",
        "_finished_at",
        "_finished_mono",
        "_handing_back",
        "_history",
        "_holds_slot",
        "_inputs",
        "_left",
        "_mono",
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
        "_waiters",
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
        plan: AttemptPlan | None = None,
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
        #: What every attempt of a run of this spec on this host shares; a factory that
        #: makes many such runs (the controller's) passes the one it resolved before.
        self._plan: AttemptPlan = plan or plan_for(
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
        # tuple.__new__ itself: a named tuple's own __new__ is one Python call more.
        self._inputs = _NEW_TUPLE(AttemptInputs, (self.task_id, args, kwargs, upstream))
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
        #: The clock ``_started_mono`` was read on (its attempt's): the end is read on it too.
        self._mono: Callable[[], float] | None = None
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
        #: The futures of those waiting for the end (``wait``), each its own.
        self._waiters: list[asyncio.Future[None]] | None = None
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
    def plan(self) -> AttemptPlan:
        """The constants its attempts share (function, executor, timeout, windows, limits)."""
        return self._plan

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

    @property
    def current_attempt(self) -> Attempt | None:
        """The attempt running now, which is its function's context (None between attempts)."""
        return self._current

    def heartbeat_at(self) -> float | None:
        """Epoch seconds of the current attempt's last checkpoint (None between attempts)."""
        current = self._current
        if current is None:
            return None
        return self._time() - current.heartbeat_age()

    def dispatch(self) -> bool:
        """Start the next attempt if the run is still queued (the lifecycle's)."""
        raise NotImplementedError

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
                mono = self._mono = loop_clock(asyncio.get_running_loop())
                self._started_mono = mono()
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
        # No attempt will run in it again: let go of what the submitter's context holds.
        self.caller_context = _SPENT_CONTEXT
        mono = self._mono
        if mono is not None:
            self._finished_mono = mono()  # only a run that ran has an elapsed time
        if self._left is not None and not self._left.done():
            self._left.set_result(None)
        if (
            self._start_timer is not None
            or self._retry_timer is not None
            or self._pause_timer is not None
        ):
            self.discard()
        waiters = self._waiters
        if waiters is not None:
            self._waiters = None
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        callbacks = self._done_callbacks
        if callbacks is not None:
            self._done_callbacks = None
            for callback in callbacks:
                call_done_callback(callback, self)

    def discard(self) -> None:
        """The host refused this run after all (its creation failed), or it ended: no timers."""
        for timer in (self._start_timer, self._retry_timer, self._pause_timer):
            if timer is not None:
                timer.cancel()
        self._start_timer = self._retry_timer = self._pause_timer = None

    def _settle_pause(self, paused: bool) -> None:
        waiter = self._pause_waiter
        self._pause_waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result(paused)
