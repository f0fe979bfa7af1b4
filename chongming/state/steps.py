"""What the end of an attempt writes: a pure decision from the facts to the transitions.

The run gathers the facts (how the attempt ended, the status it is in, the
stop reason, whether its retry policy asked for another attempt, whether a
closing worker gives it back) and applies what :func:`steps_for` returns:
the transitions, in order, then one follow-up that needs the run's effects
(a retry timer, a hand-back to the queue, a park). Tested without a loop:
every sequence it returns is legal in the table from the status it was given
and leaves the run ended or waiting (``retry_wait``) for its follow-up.

A run ``paused`` when its attempt ended first releases the pause
(:data:`RELEASED_WHILE_PAUSED`, after telling the carrier) and asks from
``running``.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger

__all__ = ["RELEASED_WHILE_PAUSED", "End", "Move", "Then", "asks_retry", "steps_for"]


class End(enum.Enum):
    """How an attempt ended, as its run records it."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RESULT_INVALID = "result_invalid"  # failed: the function returned what cannot be stored
    STOPPED = "stopped"
    LOST = "lost"
    PARKED = "parked"  # a durable task's long sleep or fact wait


class Then(enum.Enum):
    """What the run does once the transitions are applied."""

    NOTHING = "nothing"
    RETRY_LATER = "retry_later"  # arm the retry timer for the backoff
    GIVE_BACK = "give_back"  # a closing worker: back to the queue, claimable when the retry is due
    HAND_BACK = "hand_back"  # a handed-back attempt really ended: back to the queue now
    PARK = "park"  # back to the queue until the wake-up time


class Move(NamedTuple):
    target: TaskStatus
    trigger: str
    reason: str | None = None


RELEASED_WHILE_PAUSED = Move(
    TaskStatus.RUNNING, Trigger.PAUSE_RELEASED, "the task ended while paused"
)
_FAILURES = frozenset({End.FAILED, End.RESULT_INVALID})
_NOTHING: tuple[()] = ()


def asks_retry(status: TaskStatus, end: End) -> bool:
    """Whether the retry policy is asked about this end (a failure not under a stop)."""
    return end in _FAILURES and status is not TaskStatus.STOPPING


def steps_for(
    status: TaskStatus,
    end: End,
    *,
    retry: bool | None = None,
    stop_reason: str | None = None,
    note: str | None = None,
    handing_back: str | None = None,
    gives_back: bool = False,
    failure_message: str = "",
) -> tuple[tuple[Move, ...], Then]:
    """The transitions an attempt's end writes from ``status``, and what follows them.

    ``retry``: the policy's answer when :func:`asks_retry` (``None``: not
    asked, or it raised: no retry). ``stop_reason``: why a stop was asked;
    ``note``: how a killed carrier ended; ``handing_back``: why a closing
    worker hands the run back (``None``: it does not); ``gives_back``: a
    retry goes back to the queue instead of waiting here.
    """
    if status is TaskStatus.PAUSED:
        raise ValueError("release the pause first (RELEASED_WHILE_PAUSED), then ask from running")
    if end is End.SUCCEEDED:
        return (Move(TaskStatus.SUCCEEDED, Trigger.COMPLETED),), Then.NOTHING
    stopping = status is TaskStatus.STOPPING
    if end is End.STOPPED:
        if not stopping and handing_back is not None:
            return _NOTHING, Then.HAND_BACK
        reason = stop_reason
        if note is not None:
            reason = note if reason is None else f"{reason}; {note}"
        confirmed = Move(TaskStatus.STOPPED, Trigger.STOP_CONFIRMED, reason)
        if stopping:
            return (confirmed,), Then.NOTHING
        closing = Move(TaskStatus.STOPPING, Trigger.SHUTDOWN, "the host is closing")
        return (closing, confirmed), Then.NOTHING
    if end is End.PARKED:
        if stopping:  # the stop came as it parked: it ended at a safe point, so it stopped
            return (Move(TaskStatus.STOPPED, Trigger.STOP_CONFIRMED, stop_reason),), Then.NOTHING
        return _NOTHING, Then.PARK
    if end is End.LOST:
        stopped = stopping or handing_back is not None
        trigger = Trigger.STOP_ABANDONED if stopped else Trigger.TIMEOUT_ABANDONED
        return (Move(TaskStatus.LOST, trigger, stop_reason or handing_back),), Then.NOTHING
    trigger = Trigger.RESULT_INVALID if end is End.RESULT_INVALID else Trigger.FAILED
    if stopping:
        return (Move(TaskStatus.FAILED, trigger, stop_reason),), Then.NOTHING
    if not retry:
        return (Move(TaskStatus.FAILED, trigger),), Then.NOTHING
    waiting = Move(TaskStatus.RETRY_WAIT, Trigger.RETRY_SCHEDULED, failure_message[:200])
    return (waiting,), Then.GIVE_BACK if gives_back else Then.RETRY_LATER
