"""Judging how an attempt ended: a pure function, tested without a loop.

The inputs are facts (did the call return, what did it raise, what did the
runtime force, can the carrier be killed); the output says what may be
truthfully recorded.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import NamedTuple

from chongming.errors import CheckpointMisuse, NondeterminismError, TaskCancelled
from chongming.executors.base import (
    CarrierFailure,
    StopSemantics,
    ThreadBaseException,
    ends_its_carrier,
)
from chongming.state.error_text import describe_error as describe_error
from chongming.state.error_text import error_message
from chongming.state.error_text import storable_text as storable_text
from chongming.state.records import Failure, FailureKind, JsonValue

__all__ = [
    "Force",
    "ForceKind",
    "Verdict",
    "VerdictKind",
    "describe_error",
    "judge",
    "judge_return",
    "storable_text",
]


class ForceKind(enum.Enum):
    STOP = "stop"  # a person asked and the grace window ran out
    TIMEOUT = "timeout"  # per-attempt or idle timeout
    SHUTDOWN = "shutdown"  # the host is closing and cancelled the driver
    HAND_BACK = "hand_back"  # a closing worker gives a durable task to another node


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Force:
    """Something the runtime did to end an attempt early."""

    kind: ForceKind
    timeout_kind: FailureKind | None = None
    cancelled: bool = False  # the carrier was cancelled (not just asked)


class VerdictKind(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    LOST = "lost"
    PARKED = "parked"  # a durable task handed its slot back: value {"wake_at", "fact"}


class Verdict(NamedTuple):
    """What may be recorded about one attempt (a named tuple: built once per attempt)."""

    kind: VerdictKind
    value: JsonValue = None
    failure: Failure | None = None
    error: BaseException | None = None
    note: str | None = None  # how a killed carrier ended, for the history's reason


_SUCCEEDED = VerdictKind.SUCCEEDED


def judge(
    *,
    returned: bool,
    value: JsonValue = None,
    error: BaseException | None = None,
    cancelled: bool = False,
    launched: bool = True,
    force: Force | None,
    stop_requested: bool,
    stop_semantics: StopSemantics | None,
    carrier_end: str | None = None,
) -> Verdict:
    """Decide what happened to one attempt.

    ``stop_semantics`` is ``None`` for coroutines (cancellable at an await).
    ``launched`` says whether the function ever began on its carrier: one
    that never began cannot be lost. ``carrier_end`` is how a ``KILL``
    executor ended its carrier when cancelled: ``"terminated"`` (it exited
    on SIGTERM) or ``"killed"`` (it outlived SIGTERM), ``None`` if it did
    not have to.
    """
    if cancelled:
        # The carrier was interrupted by us; whether it really ended depends on it.
        if stop_semantics is StopSemantics.ABANDON and launched:
            reason = (
                "the thread did not stop within its grace window and was abandoned; "
                "it may still be running"
            )
            if force is not None and force.kind is ForceKind.TIMEOUT:
                reason = f"timed out ({_kind_text(force)}) and " + reason
            return Verdict(kind=VerdictKind.LOST, failure=_lost(reason))
        if force is not None and force.kind is ForceKind.TIMEOUT:
            suffix = "" if carrier_end is None else f"; the process was {_ended(carrier_end)}"
            return Verdict(kind=VerdictKind.FAILED, failure=_timeout(force, suffix))
        if carrier_end is None:
            return Verdict(kind=VerdictKind.STOPPED)
        after_grace = force is not None and force.kind is ForceKind.STOP
        return Verdict(kind=VerdictKind.STOPPED, note=_ended(carrier_end, after_grace))
    if returned:
        return judge_return(value, force)
    assert error is not None
    if isinstance(error, CarrierFailure):
        failure = dataclasses.replace(
            error.failure,
            message=storable_text(error.failure.message),
            exception_type=None
            if error.failure.exception_type is None
            else storable_text(error.failure.exception_type),
        )
        return Verdict(kind=VerdictKind.FAILED, failure=failure, error=error.error or error)
    if isinstance(error, TaskCancelled) and stop_requested:
        if force is not None and force.kind is ForceKind.TIMEOUT:
            return Verdict(kind=VerdictKind.FAILED, failure=_timeout(force))
        return Verdict(kind=VerdictKind.STOPPED)
    if isinstance(error, ThreadBaseException):
        exception_type = error.original_type
    else:
        exception_type = type(error).__name__
    exception_type = storable_text(exception_type)
    failure = Failure(
        kind=FailureKind.EXCEPTION,
        message=error_message(error),
        exception_type=exception_type,
        # A carrier-killing BaseException, a misuse of the API or code that no
        # longer matches its durable record will not get better.
        retryable=not isinstance(
            error, ThreadBaseException | CheckpointMisuse | NondeterminismError
        )
        and not ends_its_carrier(error),
    )
    return Verdict(kind=VerdictKind.FAILED, failure=failure, error=error)


def judge_return(value: JsonValue, force: Force | None) -> Verdict:
    """:func:`judge` for a call that returned ``value`` (the common case, kept short)."""
    if force is not None and force.cancelled:
        if force.kind is ForceKind.TIMEOUT:
            failure = _timeout(force, "; it swallowed the cancellation, its result is dropped")
            return Verdict(VerdictKind.FAILED, failure=failure)
        return Verdict(
            VerdictKind.LOST,
            failure=_lost(
                "the coroutine swallowed its cancellation and returned; its work may be partial"
            ),
        )
    return Verdict(_SUCCEEDED, value)


def _timeout(force: Force, suffix: str = "") -> Failure:
    return Failure(
        kind=force.timeout_kind or FailureKind.TIMEOUT_ATTEMPT,
        message=f"attempt timed out ({_kind_text(force)}){suffix}",
        retryable=True,
    )


def _ended(carrier_end: str, after_grace: bool = False) -> str:
    """``terminated after grace``, ``killed (it outlived SIGTERM)``, ..."""
    when = " after grace" if after_grace else ""
    if carrier_end == "killed":
        return f"killed{when} (it outlived SIGTERM)"
    return f"{carrier_end}{when}"


def _lost(reason: str) -> Failure:
    return Failure(kind=FailureKind.LOST, message=reason, retryable=False)


def _kind_text(force: Force) -> str:
    kind = force.timeout_kind or FailureKind.TIMEOUT_ATTEMPT
    return "idle: no checkpoint" if kind is FailureKind.TIMEOUT_IDLE else "per attempt"
