"""The ends of a run that no attempt reports: a start timeout, an internal error.

Functions of the run (its rare path, kept out of ``lifecycle.py``): they move
it only through its ``_move`` and give its slot back exactly once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from chongming.run.statuses import FAILED, QUEUED, STARTING
from chongming.run.verdict import describe_error, storable_text
from chongming.state.records import Failure, FailureKind
from chongming.state.status import TaskStatus
from chongming.state.table import shortest_path
from chongming.state.triggers import Trigger

if TYPE_CHECKING:
    from chongming.run.lifecycle import RunLifecycle

__all__ = ["fail_internally", "start_timed_out"]

_log = logging.getLogger("chongming.run")
_TERMINAL = frozenset(s for s in TaskStatus if s.is_terminal)


def start_timed_out(run: RunLifecycle) -> None:
    """Submission to a real start took longer than ``Timeout.start``: final."""
    run._start_timer = None
    status = run.status
    if status is QUEUED or run._claimed_start():
        run.host.withdraw(run)
    elif status is STARTING:
        current = run._current
        if current is None or not current.abandon_start():
            return  # the function began just now: it runs
        run._current = None
    else:
        return
    assert run.timeout is not None
    assert run.timeout.start is not None
    run._failure = Failure(
        kind=FailureKind.TIMEOUT_START,
        message=f"not started within {run.timeout.start:g}s of submission",
        retryable=False,  # a task that never started cannot go to retry_wait: final
    )
    try:
        run._move(FAILED, Trigger.START_TIMEOUT)
    finally:
        run._give_back_slot()


def fail_internally(run: RunLifecycle, error: BaseException, doing: str) -> None:
    """The runtime's own bookkeeping failed: record it loudly and end the run."""
    _log.error("internal error while %s for task %r", doing, run.task_id, exc_info=error)
    run._failure = Failure(
        kind=FailureKind.EXCEPTION,
        message=storable_text(f"internal error while {doing}: {describe_error(error)}"),
        exception_type=storable_text(type(error).__name__),
        retryable=False,
    )
    status = run.status
    if status in _TERMINAL:
        return
    run._leave_waiting(status)
    current = run._current
    if current is not None:
        run._current = None  # its later report is not trusted
        current.stop_within(0.0)  # the carrier may still run; tell it to end
    for step in shortest_path(status, FAILED)[1:]:
        try:
            run._move(step, Trigger.INTERNAL_ERROR, reason=doing)
        except Exception:
            _log.exception("could not record the internal error of %r", run.task_id)
            return
    run._give_back_slot()
