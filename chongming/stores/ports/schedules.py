"""Schedules: cadences kept in the store and fired exactly once per tick (optional).

The records are in :mod:`chongming.stores.schedules`; a store without
schedules inherits defaults that raise ``NotImplementedError``.

Clock: every judgement of "due" is the store's (PostgreSQL's
``clock_timestamp()``; SQLite's wall clock raised to the fleet's high-water
mark; the in-memory store's injected clock), so the clock of one node never
decides a tick for the others.

Cancellation: cancelling a ``fire_schedule`` leaves its outcome unknown (it
may commit). That is safe to retry: a second fire of the same plan loses the
compare-and-set, and its tasks' idempotency keys name the ones written.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from chongming.state.records import TaskSnapshot, Transition

if TYPE_CHECKING:
    from chongming.stores.schedules import ScheduleFire, ScheduleRecord

__all__ = ["ScheduleStore"]


class ScheduleStore(Protocol):
    """Keep schedules; fire a tick and advance the schedule in one decision."""

    async def put_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """Create ``schedule`` under its key, or change the stored one; the stored record.

        When a schedule with that key exists with the same definition
        (:func:`~chongming.stores.schedules.same_definition`), nothing changes:
        its ``next_fire``, ``paused`` and history stand (every worker puts its
        ``@task`` schedules at start). With another definition it takes the new
        one and ``schedule.next_fire``, keeps ``paused``, and its revision is
        bumped. Optional: a store without schedules raises ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} has no schedules")

    async def get_schedule(self, key: str) -> ScheduleRecord | None:
        raise NotImplementedError(f"{type(self).__name__} has no schedules")

    async def schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by key."""
        raise NotImplementedError(f"{type(self).__name__} has no schedules")

    async def remove_schedule(self, key: str) -> bool:
        """Delete schedule ``key`` (tasks it enqueued stay); whether it existed."""
        raise NotImplementedError(f"{type(self).__name__} has no schedules")

    async def pause_schedule(
        self, key: str, *, paused: bool, next_fire: datetime | None = None
    ) -> ScheduleRecord:
        """Pause or resume ``key``; on resume ``next_fire`` (if given) replaces the stored one.

        A paused schedule fires nothing. Resuming with the first tick after
        now skips what came due while it was paused. Raises
        :class:`~chongming.errors.UnknownSchedule` for a key it does not hold.
        """
        raise NotImplementedError(f"{type(self).__name__} has no schedules")

    async def fire_schedule(
        self,
        key: str,
        *,
        revision: int,
        decided: datetime,
        next_fire: datetime,
        tasks: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        last_fired: datetime | None,
    ) -> ScheduleFire:
        """Enqueue ``tasks`` and move the schedule to ``next_fire``, atomically, or nothing.

        Applied only when the stored schedule is at ``revision``, not paused,
        and ``decided`` (the newest tick the plan decides) is due by the
        store's clock; otherwise nothing is written and ``won`` is false. Each
        task carries its tick's idempotency key
        (:func:`~chongming.stores.schedules.tick_key`): a key that already
        names a task (any input) leaves that task alone and writes no other.
        """
        raise NotImplementedError(f"{type(self).__name__} has no schedules")

    async def schedule_clock(self) -> datetime:
        """The store's clock now (aware, UTC): the one ticks are judged by."""
        raise NotImplementedError(f"{type(self).__name__} has no schedules")
