"""A durable task's waits: a sleep and a fact wait whose deadline and outcome are steps.

Each wait records when it ends (by the store's clock, so every node that
replays the task agrees) before it waits, and a fact wait records what it
decided: a replay sleeps only what is left and answers the same, fact or
timeout, whatever the store holds by then. On a worker's claim a long wait
parks the task in the queue instead of holding its slot. The journal
(:mod:`chongming.plane.durable`) records; this module decides when to look,
when to give up and when to park.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from chongming.clock import SYSTEM_CLOCK
from chongming.errors import FactTimeout
from chongming.plane.any_wait import AnyWaitJournal
from chongming.plane.outages import through_outages
from chongming.stores.durable import StepRecord
from chongming.task_api.journal import ParkRequest

__all__ = ["FACT_RECHECK", "WaitJournal", "sleep", "wait_for_fact"]

#: A task parked waiting for a fact is claimed again after this long at most, to
#: look once more: a safety net under the wake that sending the fact causes.
FACT_RECHECK = 3600.0


class WaitJournal(AnyWaitJournal, Protocol):
    """The journal methods a durable wait is built of (control/durable.py)."""

    async def call(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        label: str,
    ) -> Any: ...


async def wait_for_fact(
    journal: WaitJournal,
    name: str,
    *,
    timeout: float | None,
    check: Callable[[], Any] | None,
    poll_interval: float,
    beat: Callable[[], Awaitable[None]],
) -> Any:
    """The fact ``name`` (or what ``check`` found), or :class:`FactTimeout`: decided once.

    The deadline is recorded first (a resumed attempt keeps the original
    one), then the store is read before every wait, so a fact sent before
    the waiter existed, or while it slept, or while no worker held the
    task, is found. The outcome is recorded as a step: a replay answers the
    same, fact or timeout, whatever the store holds by then.
    """
    journal.check_fenced()
    key = f"fact:{name}"
    waits = journal.any_waits
    if timeout is None and check is None and name in waits.decided:
        return _decided(journal, waits.decided[name], name, timeout)  # ctx.as_completed saw it
    offset = await journal.clock_offset()
    if timeout is None and waits.take_open(name):
        deadline = None  # a wait for several facts recorded this one's deadline step
    else:
        deadline = await journal.step(f"{key}:deadline", _deadline, (timeout, offset), {})
    (_, occurrence), after, recorded = journal.call_of(key)
    if recorded is not None:
        return _decided(journal, recorded, name, timeout)
    while True:
        found = await through_outages(lambda: journal.store.get_fact(journal.task_id, name))
        value: Any = None if found is None else {"fact": found.payload}
        if value is None and check is not None:
            checked = await journal.call(check, (), {}, label=f"check of fact {name!r}")
            if checked is not None and checked is not False:
                value = {"fact": checked}
        if value is None and deadline is not None and SYSTEM_CLOCK.time() + offset >= deadline:
            value = {"timeout": True}
        if value is not None:
            step = StepRecord(name=key, occurrence=occurrence, ok=True, value=value, after=after)
            return _decided(journal, await journal.record(step), name, timeout)
        await beat()  # stop and pause take effect here; the heartbeat moves on
        now = SYSTEM_CLOCK.time() + offset  # the store's clock, as of this node
        if journal.parkable and await waits.may_park(journal, (name,)):
            _park_waiting(name, now, deadline, check, poll_interval, journal.park_threshold)
        wait = poll_interval
        if deadline is not None:
            wait = max(0.0, min(wait, deadline - now))
        await asyncio.sleep(wait)


async def sleep(
    journal: WaitJournal, name: str, seconds: float, *, beat: Callable[[], Awaitable[None]]
) -> None:
    """Sleep until a wake-up time recorded once: a replay sleeps only what is left.

    The wake-up time is the store's clock: every node that replays the
    task agrees on it, and the claim of a parked task reads it the same.
    """
    journal.check_fenced()
    offset = await journal.clock_offset()
    wake = await journal.step(f"sleep:{name}", _deadline, (seconds, offset), {})
    if (
        journal.parkable
        and wake - (SYSTEM_CLOCK.time() + offset) >= journal.park_threshold
        and await journal.any_waits.may_park(journal, ())
    ):
        raise ParkRequest(wake)  # the attempt ends; the task is claimable again at ``wake``
    while (left := wake - (SYSTEM_CLOCK.time() + offset)) > 0:
        await beat()  # stop and pause take effect while it sleeps
        await asyncio.sleep(min(left, 1.0))


def _decided(journal: WaitJournal, step: StepRecord, name: str, timeout: float | None) -> Any:
    value = step.value if isinstance(step.value, dict) else {}
    if "fact" in value:
        return value["fact"]
    raise FactTimeout(journal.task_id, name, timeout or 0.0)


def _deadline(timeout: float | None, offset: float) -> float | None:
    """When ``timeout`` runs out, by the store's clock (``offset``: its lead on this node's)."""
    return None if timeout is None else SYSTEM_CLOCK.time() + offset + timeout


def _park_waiting(
    name: str,
    now: float,
    deadline: float | None,
    check: Callable[[], Any] | None,
    poll_interval: float,
    threshold: float,
) -> None:
    """Raise :class:`ParkRequest` when an unanswered wait has ``threshold`` or more to go.

    At the first look that did not find the fact: holding the slot while
    waiting for a fact another task sends (a child) is what starves that
    task of the slot. Parked, the task waits in the queue until the
    deadline, the fact (the store wakes it when the fact is sent), or
    :data:`FACT_RECHECK`. A ``check`` is the caller's own poll: it parks
    only between polls at least ``threshold`` apart, until the next poll.
    Times are the store's clock.
    """
    if threshold == math.inf or (deadline is not None and deadline - now < threshold):
        return
    if check is not None:
        if poll_interval < threshold:
            return
        wake = now + poll_interval
    else:
        wake = now + FACT_RECHECK
    raise ParkRequest(wake if deadline is None else min(wake, deadline), fact=name)
