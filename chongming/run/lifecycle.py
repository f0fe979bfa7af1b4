"""A run's lifecycle: what its host and its attempts drive (the handle is ``TaskRun``).

The state and its one writer (``_move``) are :class:`~chongming.run.run_state.RunState`;
this adds the moves: submit, admission, dispatch, what the current
:class:`~chongming.run.attempt.Attempt` reports (it sees the run only as its
listener), stop and pause requests. How an attempt's end is recorded, past the
common success, is :mod:`chongming.run.attempt_end`.

**Every attempt ends.** Whatever user-supplied code does (a retry predicate
that raises, a done callback that raises, a function that returns while a
helper of it is parked at a checkpoint), the run reaches a legal state and its
slot is given back exactly once. A failure of the runtime's own bookkeeping is
recorded on the run (``failed``, kind ``exception``, naming what failed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from chongming.run.abnormal_ends import fail_internally, start_timed_out
from chongming.run.arguments import check_actor as check_actor
from chongming.run.arguments import check_tags as check_tags
from chongming.run.attempt import Attempt
from chongming.run.attempt_end import record_end
from chongming.run.hand_back import hand_back
from chongming.run.history import steps_from
from chongming.run.outcome import call_done_callback
from chongming.run.run_state import RunState
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
from chongming.run.verdict import Verdict, VerdictKind
from chongming.state.records import JsonValue, Progress, TaskSnapshot
from chongming.state.records import Transition as TransitionRecord
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger

_log = logging.getLogger("chongming.run")
_NOT_STARTED = frozenset({PENDING, BLOCKED, QUEUED, RETRY_WAIT})
_TERMINAL = frozenset(s for s in TaskStatus if s.is_terminal)
_V_SUCCEEDED = VerdictKind.SUCCEEDED


__all__ = ["RunLifecycle", "call_done_callback", "check_actor", "check_tags"]


class RunLifecycle(RunState):
    """Everything that moves a run, except what its user calls (:class:`TaskRun`).

    The host (admission) and the current attempt drive it.
    """

    __slots__ = ()

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
        gate = host.launch_gate(self) if host.gated else None
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
                self._mono = attempt._time
            self._move(RUNNING, Trigger.LAUNCHED)

    def attempt_paused(self, attempt: Attempt, generation: int) -> None:
        """A checkpoint parked for pause ``generation``; a stale receipt is ignored."""
        if (
            attempt is not self._current
            or self.status is not PAUSING
            or not attempt.pause_requested
            or generation != attempt.pause_generation
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
                record_end(self, attempt, verdict)
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
            current.stop_within(self.windows.stop_grace)
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
            current.withdraw_pause()
        self._move(RUNNING, Trigger.PAUSE_NOT_REACHED)
