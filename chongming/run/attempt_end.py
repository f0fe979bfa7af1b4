"""How the end of an attempt is recorded, past the common success (inline in ``attempt_ended``).

Functions of the run (kept out of ``lifecycle.py``): they gather the facts
(the verdict, the retry policy's decision, a stop's reason, a hand-back),
ask the pure :func:`~chongming.state.steps.steps_for` which transitions
follow, and apply them through the run's ``_move``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from typing import TYPE_CHECKING, Any

from chongming.clock import to_datetime
from chongming.run.hand_back import give_back, hand_back_ended
from chongming.run.statuses import (
    PAUSED,
    QUEUED,
    RETRY_WAIT,
    RUNNING,
)
from chongming.run.verdict import Verdict, VerdictKind, describe_error, storable_text
from chongming.state.records import Failure, FailureKind
from chongming.state.steps import RELEASED_WHILE_PAUSED, End, Then, asks_retry, steps_for
from chongming.state.triggers import Trigger

_log = logging.getLogger("chongming.run")
_ENDS = {kind: End(kind.value) for kind in VerdictKind}

if TYPE_CHECKING:
    from chongming.run.attempt import Attempt
    from chongming.run.lifecycle import RunLifecycle


__all__ = ["park", "record_end"]


def record_end(run: RunLifecycle, attempt: Attempt, verdict: Verdict) -> None:
    """Gather the facts, then apply what :func:`~chongming.state.steps.steps_for` says."""
    status = run.status
    if status is PAUSED:
        # The function ended while parked elsewhere (a helper task or
        # thread sat at the checkpoint): release the pause, then say how.
        attempt.withdraw_pause()
        attempt.resume_clock()
        target, trigger, reason = RELEASED_WHILE_PAUSED
        run._move(target, trigger, reason=reason)
        status = RUNNING
    end = _ENDS[verdict.kind]
    failure = verdict.failure
    if end is End.SUCCEEDED:
        run._result = verdict.value
        run._failure = None  # an earlier attempt's failure is history, not the outcome
    elif end is End.LOST:
        run._failure = failure
    elif end is End.FAILED:
        assert failure is not None
        run._failure = failure
        if failure.kind is FailureKind.RESULT_INVALID:
            end = End.RESULT_INVALID
    retry: bool | None = None
    gives_back = False
    requeued: str | None = None
    delay = 0.0
    if failure is not None and asks_retry(status, end):
        try:
            decision = run.retry.decide(attempt.number, failure, verdict.error, random.random())
        except (Exception, asyncio.CancelledError) as error:
            # User code (a predicate, a backoff) raised; no await happens here, so
            # even a CancelledError is theirs, not a cancellation of ours: the
            # task fails, saying why.
            run._failure = Failure(
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
            if retry and (run._handing_back is not None or run.host.hands_back(run)):
                gives_back = True
            elif retry:
                requeued = run.host.requeues_retry(run)  # a rate-limited start, say
                gives_back = requeued is not None
    moves, then = steps_for(
        status,
        end,
        retry=retry,
        stop_reason=run._stop_reason,
        note=verdict.note,
        handing_back=run._handing_back,
        gives_back=gives_back,
        failure_message="" if failure is None else failure.message,
    )
    for target, trigger, reason in moves:
        run._move(target, trigger, reason=reason)
    if then is Then.RETRY_LATER:
        loop = asyncio.get_running_loop()
        run._retry_timer = loop.call_later(delay, run._retry_due)
    elif then is Then.GIVE_BACK:
        if requeued is None:
            give_back(run, run._time() + delay, Trigger.RETRY_RELEASED)
        else:
            give_back(run, run._time() + delay, Trigger.RETRY_RELEASED, requeued)
    elif then is Then.HAND_BACK:
        hand_back_ended(run, attempt)
    elif then is Then.PARK:
        parked = verdict.value
        assert isinstance(parked, dict)
        park(run, float(parked["wake_at"]), parked["fact"])


def park(run: RunLifecycle, wake_at: float, fact: Any) -> None:
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
    run._move(RETRY_WAIT, Trigger.SLEEPING, reason=f"until {waiting}{until.isoformat()}")
    stored = run.adopted
    if stored is not None:
        run.adopted = dataclasses.replace(stored, not_before=until, owner=None)
    run.owner = None
    run._move(QUEUED, Trigger.PARKED, reason=f"claimable from {waiting}{until.isoformat()}")
    run.host.park(run)
