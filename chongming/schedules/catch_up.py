"""Which due ticks of a schedule fire now, and where it goes next (pure).

A schedule's stored ``next_fire`` is its oldest tick not yet decided. When
the store's clock has reached it, every tick from it up to now is *due*;
the policy decides which of them fire:

- ``all``: every due tick fires, oldest first (at most :data:`MAX_BATCH`
  per decision; the rest in the next ones, at once);
- ``latest`` (the default): the due ticks collapse into one run, the newest;
  the older ones are skipped;
- ``skip``: only a tick on time fires: the newest due tick, if it is no more
  than :data:`SKIP_GRACE` late; missed ones are skipped.

Either way the next ``next_fire`` is the first tick after the last one
decided, so a tick is decided once: fired or skipped, never both, never
twice. The store applies the plan only if nobody decided first
(:meth:`~chongming.stores.ports.schedules.ScheduleStore.fire_schedule`).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from chongming.schedules.cadence import Cadence

__all__ = ["MAX_BATCH", "SKIP_GRACE", "FirePlan", "plan_fires"]

#: The most ticks one decision fires under ``all`` (the rest follow at once).
MAX_BATCH = 100
#: The most skipped cron ticks a plan counts (it walks them; the log says "at least").
MAX_COUNTED = 100
#: How late a tick may be and still fire under ``skip``.
SKIP_GRACE = timedelta(seconds=10)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FirePlan:
    """Ticks to fire (oldest first), how many due ticks were skipped, the next ``next_fire``."""

    fires: tuple[datetime, ...]
    skipped: int
    next_fire: datetime
    #: The newest tick this plan decides (fired or skipped): it must be due by the store's clock.
    decided: datetime


def plan_fires(
    cadence: Cadence, next_fire: datetime, now: datetime, catch_up: str
) -> FirePlan | None:
    """The plan for the ticks due at ``now``; ``None`` when ``next_fire`` is still ahead."""
    if next_fire > now:
        return None
    if catch_up == "all":
        fires, _ = cadence.ticks_between(next_fire, now, limit=MAX_BATCH)
        last = fires[-1]
        return FirePlan(
            fires=tuple(fires),
            skipped=0,
            next_fire=cadence.next_after(last, start=next_fire),
            decided=last,
        )
    newest = cadence.last_at_or_before(next_fire, now)
    last = next_fire if newest is None else newest  # next_fire itself is due: never None
    skipped = _count_between(cadence, next_fire, last)
    following = cadence.next_after(last, start=next_fire)
    if catch_up == "skip" and now - last > SKIP_GRACE:
        return FirePlan(fires=(), skipped=skipped + 1, next_fire=following, decided=last)
    return FirePlan(fires=(last,), skipped=skipped, next_fire=following, decided=last)


def _count_between(cadence: Cadence, first: datetime, last: datetime) -> int:
    """Ticks from ``first`` up to but not including ``last``, counted to at most
    :data:`MAX_COUNTED` for cron (a figure for the log, never worth a long walk)."""
    if cadence.every is not None:
        return (last - first) // cadence.every
    ticks, cut = cadence.ticks_between(first, last, limit=MAX_COUNTED)
    return len(ticks) - (0 if cut else 1)
