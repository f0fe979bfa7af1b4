"""A closing worker hands its claimed runs back to the queue instead of stopping them.

Functions of the run (its rare path, kept out of ``lifecycle.py``): they move
it only through its ``_move``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from chongming.clock import to_datetime
from chongming.run.statuses import PAUSING, QUEUED, RETRY_WAIT, RUNNING, STARTING
from chongming.state.triggers import Trigger

if TYPE_CHECKING:
    from chongming.run.attempt import Attempt
    from chongming.run.lifecycle import RunLifecycle

__all__ = ["give_back", "hand_back", "hand_back_ended", "resolve_left"]


def hand_back(run: RunLifecycle, reason: str) -> bool:
    """The host is closing: give this claimed run back to the queue instead of stopping it.

    False (nothing done) unless the host hands this run back (a worker's
    claimed run, see :meth:`RunHost.hands_back`) and it is waiting to
    retry or has a live attempt (``starting running pausing``); a
    ``paused`` or ``stopping`` run is stopped as a person asked. A
    retry wait goes back at once, claimable when the retry is due. A
    durable run's attempt is cancelled now (its steps replay on the next
    worker); any other is asked to stop, and once it really ended it goes
    back if its retry policy has an attempt left (else it is ``stopped``).
    """
    if not run.host.hands_back(run):
        return False
    status = run.status
    if status is RETRY_WAIT:
        timer = run._retry_timer
        due = run._time()
        if timer is not None:
            timer.cancel()
            run._retry_timer = None
            due += max(0.0, timer.when() - asyncio.get_running_loop().time())
        give_back(run, due, Trigger.RETRY_RELEASED)
        return True
    current = run._current
    if current is None or status not in (STARTING, RUNNING, PAUSING):
        return False
    durable = run.spec.durable
    if not durable and run.attempt >= run.retry.max_attempts:
        return False  # no attempt left: stopped (``stopping`` now), as any stop is
    run._handing_back = reason
    if durable:
        current.hand_back()
    else:
        current.stop_within(run.windows.stop_grace)
    return True


def hand_back_ended(run: RunLifecycle, attempt: Attempt) -> bool:
    """A handed-back attempt really ended: ``-> retry_wait -> queued``. False: not one."""
    reason = run._handing_back
    if reason is None:
        return False
    run._move(
        RETRY_WAIT,
        Trigger.SHUTDOWN,
        reason=f"{reason}: attempt {attempt.number} ended, the task goes back to the queue",
    )
    # durable: the replay continues this attempt; plain: the rerun is its retry
    give_back(run, None, Trigger.HANDED_BACK if run.spec.durable else Trigger.RETRY_RELEASED)
    return True


def give_back(
    run: RunLifecycle,
    not_before: float | None,
    trigger: str = Trigger.HANDED_BACK,
    why: str = "the worker closed",
) -> None:
    """``retry_wait -> queued`` with no owner: any worker that serves it claims it."""
    until = None if not_before is None else to_datetime(not_before)
    stored = run.adopted
    if stored is not None:
        run.adopted = dataclasses.replace(stored, not_before=until, owner=None)
    run.owner = None
    when = "now" if until is None else f"from {until.isoformat()}"
    run._move(QUEUED, trigger, reason=f"{why}; claimable {when}")
    resolve_left(run)
    run.host.park(run)


def resolve_left(run: RunLifecycle) -> None:
    if run._left is None:
        run._left = asyncio.get_running_loop().create_future()
    if not run._left.done():
        run._left.set_result(None)
