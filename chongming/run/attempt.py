"""One attempt of a task: launch the carrier, watch its timeouts, judge its end."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType

from chongming.executors.base import StopSemantics
from chongming.run.plan import AttemptInputs, AttemptListener, AttemptPlan
from chongming.run.result import check_result
from chongming.run.verdict import Force, ForceKind, Verdict, VerdictKind, judge, judge_return
from chongming.state.records import Failure, FailureKind, JsonValue
from chongming.task_api.context import TaskContext
from chongming.task_api.journal import ParkRequest
from chongming.task_api.signals import CarrierKind, loop_clock

__all__ = ["Attempt"]

#: tuple.__new__ itself: a named tuple's own __new__ is one Python call more.
_NEW_TUPLE = tuple.__new__
_log = logging.getLogger("chongming.run")
_SUCCEEDED = VerdictKind.SUCCEEDED
_COROUTINE = CarrierKind.COROUTINE
_INLINE = CarrierKind.INLINE
#: The ints :func:`~chongming.state.payload.plain_json` passes as they are (64-bit).
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1
_NO_UPSTREAM: Mapping[str, JsonValue] = MappingProxyType({})


def _nothing() -> None:
    pass


class Attempt(TaskContext):
    """One try of a run, and the context its function receives (one object, not three).

    Its run holds at most one current attempt at a time. Its control block
    (the flags checkpoints read, on any thread) and the context's API are
    inherited; this adds the driver, the timers and the verdict. All its own
    methods run on the event-loop thread. The driver coroutine reports its
    end once; timers that give up on a carrier report for it, and a late end
    after that is dropped (the run already recorded ``lost``). Time is read
    on the loop's clock, the one its timers run on.
    """

    __slots__ = (
        "_cancel_timer",
        "_gate",
        "_grace_timer",
        "_held",
        "_hold_timer",
        "_listener",
        "_watch_timer",
        "finished",
        "force",
        "inputs",
        "number",
        "paused_since",
        "paused_total",
        "plan",
        "started",
        "task",
    )

    def __init__(
        self,
        plan: AttemptPlan,
        inputs: AttemptInputs,
        number: int,
        listener: AttemptListener,
        gate: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        # Every field in one constructor (the context's and the control
        # block's inline): an attempt is made per task, on the hot path.
        loop = asyncio.get_running_loop()
        executor = plan.executor
        # -- the control block (AttemptSignals.init_signals, inline)
        self.carrier = _COROUTINE if executor is None else executor.carrier
        self.launched = False
        self.abandoned = False
        self.stop_requested = False
        self.pause_requested = False
        self.pause_generation = 0
        self._time = clock = loop_clock(loop)
        self.last_beat = clock()
        self._loop = loop
        self.loop_thread = threading.get_ident()
        self._thread_gate = None
        self._async_gate = None
        self._relay = _nothing
        self.carrier_end = None
        # -- the context the function sees
        self.task_id = inputs.task_id
        self.name = plan.name
        self.attempt = number
        upstream = inputs.upstream
        self.upstream = upstream or _NO_UPSTREAM
        self._artifact_root = plan.artifact_root
        self._artifact_dir = None
        self._on_progress = listener.report_progress
        self._logger = None
        self._unawaited = None
        self.journal = None
        self.trace_id = None
        # -- the attempt
        self._gate = gate
        self.plan = plan
        self.inputs = inputs
        self.number = number
        self._listener = listener
        self.task: asyncio.Task[None] | None = None
        self.force: Force | None = None
        self.finished = False
        self.started = 0.0
        self.paused_since: float | None = None
        self.paused_total = 0.0
        self._watch_timer: asyncio.TimerHandle | None = None
        self._grace_timer: asyncio.TimerHandle | None = None
        self._cancel_timer: asyncio.TimerHandle | None = None
        #: The end the driver reported while a step's thread still ran (see _settle).
        self._held: Verdict | None = None
        self._hold_timer: asyncio.TimerHandle | None = None

    @property
    def stop_semantics(self) -> StopSemantics | None:
        executor = self.plan.executor
        return None if executor is None else executor.stop_semantics

    def launch(self) -> None:
        self.task = self._listener.spawn_attempt(self.drive())

    def abandon_start(self) -> bool:
        """Give up on a carrier that has not begun the function (start timeout).

        True when it had not begun: it never will, and this attempt reports
        nothing more. False when the function already began (its "running"
        notice is on its way); the attempt goes on.
        """
        if self.finished or self.abandon():
            return False
        self.finished = True
        self._cancel_timers()
        if self.task is not None and not self.task.done():
            self.force = Force(kind=ForceKind.TIMEOUT, timeout_kind=FailureKind.TIMEOUT_START)
            self.task.cancel()
        return True

    # -- the driver ------------------------------------------------------------

    async def drive(self) -> None:
        """The attempt's task: gate, launch, call the function, judge and report its end."""
        plan = self.plan
        inputs = self.inputs
        executor = plan.executor
        on_loop = executor is None or executor.carrier is _INLINE
        context = self
        gate = self._gate
        if gate is not None:
            self._gate = None
            try:
                if not await gate():
                    # The store does not hold our "starting" (this node was let go):
                    # the function must not begin.
                    self.request_stop()
            except asyncio.CancelledError:
                if self.finished:
                    return
                self.force = self.force or Force(kind=ForceKind.SHUTDOWN, cancelled=True)
                self._finish(cancelled=True)
                raise
            except Exception as error:  # the store could not open a durable attempt
                self._finish(error=error)
                return
            # A durable task's gate opened its journal of memoised steps.
            context.journal = getattr(gate, "journal", None)
        if on_loop:
            # Coroutines and inline calls start right here, on this thread:
            # ``enter(from_thread=False)`` and ``_on_launch()``, inline.
            self.launched = True
            if self.abandoned or self.stop_requested:
                self._report(Verdict(kind=VerdictKind.STOPPED))
                return
            if not self.finished and self.force is None:
                self.started = self._time()
                self._listener.attempt_running(self)
                if plan.timeout is not None:
                    self._arm_watch()
        try:
            if executor is None:
                value = await plan.fn(context, *inputs.args, **inputs.kwargs)
            else:
                value = await executor.run(plan.fn, context, inputs.args, inputs.kwargs)
        except asyncio.CancelledError:
            if self.finished:
                # Given up before it began (start timeout): nothing more to say.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                return
            if self.force is None:
                # The host cancelled us (shutdown or a cancelled surrounding scope).
                self.force = Force(kind=ForceKind.SHUTDOWN, cancelled=True)
                self._finish(cancelled=True)
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self._finish(cancelled=True)
        except BaseException as error:
            # SystemExit, KeyboardInterrupt, GeneratorExit raised by a coroutine task
            # fail its attempt like any error: task code ends neither the worker
            # nor its loop (carriers turn them into ThreadBaseException themselves).
            self._finish(error=error)
        else:
            kind = type(value)
            if (
                self.force is None
                and not self.finished
                and context._unawaited is None
                and context.journal is None
                and (
                    value is None or kind is bool or (kind is int and _INT_MIN <= value <= _INT_MAX)
                )
            ):
                # What _finish would say, in one step: nobody interrupted it, no
                # checkpoint is left unawaited, the result is plain JSON, no step
                # thread can still run.
                self._report(_NEW_TUPLE(Verdict, (_SUCCEEDED, value, None, None, None)))
            else:
                self._finish(returned=True, value=value)

    def _on_launch(self) -> None:
        """The carrier is about to call the function: the attempt is running."""
        if self.finished or self.force is not None:
            return
        self.started = self._time()
        self._listener.attempt_running(self)
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
                "attempt %d of task %r ended after it was given up",
                self.number,
                self.inputs.task_id,
            )
            return
        if isinstance(error, ParkRequest) and self.force is None:
            parked = {"wake_at": error.wake_at, "fact": error.fact}
            self._report(Verdict(kind=VerdictKind.PARKED, value=parked))
            return
        if returned:
            # A killable carrier that returned was never interrupted: its result stands.
            killable = self.stop_semantics is StopSemantics.KILL
            verdict = judge_return(value, None if killable else self.force)
        else:
            verdict = judge(
                returned=False,
                error=error,
                cancelled=cancelled,
                launched=self.abandon() if cancelled else True,
                force=self.force,
                stop_requested=self.stop_requested,
                stop_semantics=self.stop_semantics,
                carrier_end=self.carrier_end,
            )
        if verdict.kind is _SUCCEEDED:
            verdict = check_result(verdict, self, self.plan.max_payload_bytes)
        self._settle(verdict)

    # -- step threads: one live copy of a step's body ----------------------------

    def _settle(self, verdict: Verdict) -> None:
        """Report ``verdict`` once no plain step function of this attempt still runs.

        A durable task's coroutine may end (cancelled by a stop, a timeout or a
        shutdown; or returning, having given up on a step) while a plain
        function a step handed to a worker thread still runs: the thread cannot
        be cancelled. Saying ``stopped``, or letting a retry or another worker
        start the same step beside it, would be untrue. So the end waits for
        those threads: after a timeout (or any end the runtime did not force)
        for up to ``stop_grace``, as a thread task gets; after a stop's grace
        or a host's cancellation at once. A thread still running then makes
        the attempt ``lost``, as for a thread task.
        """
        journal = self.journal
        threads = None if journal is None else getattr(journal, "threads", None)
        if threads is None or not threads.running:
            self._report(verdict)
            return
        force = self.force
        # A stop's grace was given already, and a host that cancels gives none.
        spent = force is not None and force.kind in (ForceKind.STOP, ForceKind.SHUTDOWN)
        window = 0.0 if spent else self.plan.windows.stop_grace
        self._held = verdict
        self._cancel_timers()
        if window <= 0:
            self._threads_outlived()
            return
        self._hold_timer = self._loop.call_later(window, self._threads_outlived)
        threads.when_idle(self._threads_done)

    def _threads_done(self) -> None:
        held = self._held
        if held is not None and not self.finished:
            self._report(held)

    def _threads_outlived(self) -> None:
        """The held end is not the truth any more: a step's thread outlived it."""
        self._hold_timer = None
        held = self._held
        if held is None or self.finished:
            return
        threads = getattr(self.journal, "threads", None)
        running = ", ".join(threads.running) if threads is not None else "a step"
        message = (
            f"{_ended_how(self.force, held)}, but the plain function of {running} was "
            "still running on its worker thread; it was abandoned and may still be running"
        )
        failure = Failure(kind=FailureKind.LOST, message=message, retryable=False)
        self._report(Verdict(kind=VerdictKind.LOST, failure=failure))

    def _report(self, verdict: Verdict) -> None:
        self.finished = True
        self._held = None
        if (
            self._watch_timer is not None
            or self._grace_timer is not None
            or self._cancel_timer is not None
            or self._hold_timer is not None
        ):
            self._cancel_timers()
        self._relay = _nothing
        self.task = None
        self._listener.attempt_ended(self, verdict)

    # -- control requests (from the run) ---------------------------------------

    def stop_within(self, grace: float) -> None:
        """Ask the function to stop; after ``grace`` seconds, make it (or give up on it)."""
        self._cancel_watch()
        self.request_stop()
        if self._grace_timer is None:
            self._grace_timer = self._loop.call_later(grace, self._grace_expired)

    def hand_back(self) -> None:
        """A closing worker gives this durable task to another node: cancel it now.

        Its recorded steps replay there; the one in progress runs again. A
        plain step's thread still running is waited for first (``_settle``).
        """
        self._cancel_watch()
        if not self.finished and self.force is None:
            self._force(Force(kind=ForceKind.HAND_BACK, cancelled=True))

    def end_grace(self) -> None:
        """A forced stop: the grace window is over now, not when its timer fires."""
        if self._grace_timer is not None:
            self._grace_timer.cancel()
            self._grace_timer = None
            self._grace_expired()

    def _grace_expired(self) -> None:
        self._grace_timer = None
        if self.finished:
            return
        if self._held is not None:
            self._threads_outlived()  # a stop's grace is over: no more waiting for a step
            return
        base = self.force or Force(kind=ForceKind.STOP)
        self._force(dataclasses.replace(base, cancelled=True))

    def _force(self, force: Force) -> None:
        """Cancel the carrier; a coroutine gets a last window to unwind."""
        self.force = force
        if self.task is None or self.task.done():
            return
        self.task.cancel()
        if self.plan.executor is None and self._cancel_timer is None:
            window = self.plan.windows.cancel_window
            self._cancel_timer = self._loop.call_later(window, self._cancel_window_expired)

    def _cancel_window_expired(self) -> None:
        self._cancel_timer = None
        if self.finished:
            return
        message = "the coroutine did not end after it was cancelled (it swallows cancellation)"
        failure = Failure(kind=FailureKind.LOST, message=message, retryable=False)
        self._report(Verdict(kind=VerdictKind.LOST, failure=failure))

    # -- pause -----------------------------------------------------------------

    def _on_pause_reached(self, generation: int) -> None:
        if not self.finished:
            self._listener.attempt_paused(self, generation)

    def suspend_clock(self) -> None:
        self._cancel_watch()
        self.paused_since = self._time()

    def resume_clock(self) -> None:
        if self.paused_since is not None:
            self.paused_total += self._time() - self.paused_since
            self.paused_since = None
        self.beat()
        self._arm_watch()

    # -- timeouts --------------------------------------------------------------

    def _arm_watch(self) -> None:
        timeout = self.plan.timeout
        if timeout is None or not timeout.watches_attempt or self.force is not None:
            return
        expiry = timeout.attempt_expiry(self.started + self.paused_total, self.last_beat)
        if expiry is None:
            return
        delay = max(0.0, expiry.at - self._time())
        self._watch_timer = self._loop.call_later(delay, self._watch_fired)

    def _watch_fired(self) -> None:
        self._watch_timer = None
        if self.finished or self.force is not None or self.paused_since is not None:
            return
        if self.stop_requested:
            return
        timeout = self.plan.timeout
        assert timeout is not None
        expiry = timeout.attempt_expiry(self.started + self.paused_total, self.last_beat)
        if expiry is None:
            return
        if expiry.at > self._time():
            self._arm_watch()  # a checkpoint moved the idle deadline
            return
        force = Force(kind=ForceKind.TIMEOUT, timeout_kind=expiry.kind)
        if self.stop_semantics is StopSemantics.ABANDON:
            # A thread can only be asked; give it the grace window before giving up.
            self.force = force
            self.stop_within(self.plan.windows.stop_grace)
        else:
            self._force(dataclasses.replace(force, cancelled=True))

    # -- housekeeping ----------------------------------------------------------

    def _cancel_watch(self) -> None:
        if self._watch_timer is not None:
            self._watch_timer.cancel()
            self._watch_timer = None

    def _cancel_timers(self) -> None:
        if self._watch_timer is not None:
            self._watch_timer.cancel()
            self._watch_timer = None
        if self._grace_timer is not None:
            self._grace_timer.cancel()
            self._grace_timer = None
        if self._cancel_timer is not None:
            self._cancel_timer.cancel()
            self._cancel_timer = None
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None


def _ended_how(force: Force | None, held: Verdict) -> str:
    """How the coroutine of an attempt ended, for a ``lost`` message."""
    if force is None:
        return f"the task ended ({held.kind.value})"
    if force.kind is ForceKind.TIMEOUT:
        kind = "idle" if force.timeout_kind is FailureKind.TIMEOUT_IDLE else "per attempt"
        return f"the attempt timed out ({kind})"
    if force.kind is ForceKind.STOP:
        return "the stop's grace window ran out"
    if force.kind is ForceKind.HAND_BACK:
        return "the worker was closing (it hands its tasks back)"
    return "the host closed"
