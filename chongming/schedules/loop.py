"""The scheduler loop a worker runs: fire what is due, sleep until the next tick.

Any number of workers run it on one store. Each pass reads the store's clock
and every schedule; for each one due it plans the fire
(:func:`~chongming.schedules.catch_up.plan_fires`) and asks the store to apply
it (:meth:`fire_schedule`): a compare-and-set on the schedule's revision that
enqueues the tick's task, keyed by the tick, in the same decision. Of workers
racing for one tick one wins; the others' plans are refused and write
nothing, and they move on from what the store now holds.

It then sleeps until the soonest ``next_fire`` (by the store's clock), or
until :meth:`wake` (a schedule changed here), and at most ``refresh`` seconds
(a schedule changed by another process is seen within that).

A failing store costs only time: the pass is logged and tried again after
``refresh``. Cancellation: :meth:`aclose` cancels the loop and waits for it; a
fire in flight may or may not have committed, which is safe either way (see
the port's Cancellation paragraph).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from chongming.background import BackgroundTask
from chongming.errors import ChongmingError
from chongming.schedules.cadence import Cadence
from chongming.schedules.catch_up import MAX_COUNTED, plan_fires
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.base import TaskStore
from chongming.stores.schedules import ScheduleRecord

__all__ = [
    "BuildTick",
    "ScheduleDraft",
    "ScheduleLoop",
    "ScheduleLoopStatistics",
    "cadence_of",
    "describe_schedule",
    "put_draft",
]

_log = logging.getLogger("chongming.schedules")

#: Makes the task one tick of a schedule enqueues (the controller's checks apply).
BuildTick = Callable[[ScheduleRecord, datetime], tuple[TaskSnapshot, Transition]]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleDraft:
    """A checked schedule definition, before the store gives it a ``next_fire``."""

    key: str
    task_name: str
    cadence: Cadence
    args: tuple[object, ...] = ()
    kwargs: dict[str, object] = dataclasses.field(default_factory=dict)
    catch_up: str = "latest"


async def put_draft(store: TaskStore, draft: ScheduleDraft) -> ScheduleRecord:
    """Store ``draft``; a new one first fires at its first tick after the store's now."""
    now = await store.schedule_clock()
    record = ScheduleRecord(
        key=draft.key,
        task_name=draft.task_name,
        cron=draft.cadence.cron,
        every=draft.cadence.every,
        timezone=draft.cadence.timezone,
        args=tuple(draft.args),
        kwargs=dict(draft.kwargs),
        catch_up=draft.catch_up,
        next_fire=draft.cadence.next_after(now),
    )
    return await store.put_schedule(record)


def cadence_of(record: ScheduleRecord) -> Cadence:
    return Cadence(cron=record.cron, every=record.every, timezone=record.timezone)


def describe_schedule(record: ScheduleRecord) -> str:
    """The cadence in words (``every 5 minutes``); the raw text if it cannot be read."""
    try:
        return cadence_of(record).describe()
    except Exception:  # a row this version cannot read (a newer one wrote it): show its text
        return record.cron or str(record.every)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleLoopStatistics:
    passes: int
    #: Fires this loop won (each one store decision; a tick fired once, here).
    fires_won: int
    #: Fires another worker decided first (nothing written by this one).
    fires_lost: int
    tasks_enqueued: int
    errors: int


class ScheduleLoop:
    """Owned by a worker: :meth:`start` once, :meth:`aclose` on close."""

    def __init__(
        self,
        store: TaskStore,
        build: BuildTick,
        *,
        declared: Callable[[], Sequence[ScheduleDraft]] = tuple,
        refresh: float = 2.0,
    ) -> None:
        self._store = store
        self._build = build
        self._declared = declared
        self._refresh = refresh
        self._changed = asyncio.Event()
        self._put: set[str] = set()  # the drafts already stored, by their repr
        self._loop = BackgroundTask("chongming:schedules")
        self._passes = self._won = self._lost = self._enqueued = self._errors = 0
        #: The error of the last failed pass: the same one again is logged at debug
        #: (a role that may not write schedules fails every pass the same way).
        self._failing: str | None = None

    def start(self) -> None:
        self._loop.start(self._run)

    def wake(self) -> None:
        """Something changed (a schedule put or resumed here, a registration): look now."""
        self._changed.set()

    def statistics(self) -> ScheduleLoopStatistics:
        return ScheduleLoopStatistics(
            passes=self._passes,
            fires_won=self._won,
            fires_lost=self._lost,
            tasks_enqueued=self._enqueued,
            errors=self._errors,
        )

    async def aclose(self) -> None:
        await self._loop.stop()

    async def _run(self) -> None:
        while True:
            self._changed.clear()
            try:
                delay = await self.run_once()
                if self._failing is not None:
                    _log.info("scheduler pass succeeded again")
                    self._failing = None
            except ChongmingError as error:  # a store outage: try again later
                self._errors += 1
                text = f"{type(error).__name__}: {error}"
                log = _log.debug if text == self._failing else _log.warning
                self._failing = text
                log("scheduler pass failed (%s); trying again in %ss", error, self._refresh)
                delay = self._refresh
            except Exception:
                self._errors += 1
                _log.exception("scheduler pass failed; trying again in %ss", self._refresh)
                delay = self._refresh
            if delay > 0:
                try:
                    async with asyncio.timeout(delay):
                        await self._changed.wait()
                except TimeoutError:
                    pass

    async def run_once(self) -> float:
        """One pass: put new declarations, fire what is due; seconds until the next look."""
        self._passes += 1
        for draft in self._declared():
            if repr(draft) not in self._put:
                await put_draft(self._store, draft)
                self._put.add(repr(draft))
        now = await self._store.schedule_clock()
        read_at = asyncio.get_running_loop().time()  # the delay counts from this reading
        soonest: datetime | None = None
        for record in await self._store.schedules():
            if record.paused:
                continue
            upcoming = await self._fire_due(record, now)
            if upcoming is not None and (soonest is None or upcoming < soonest):
                soonest = upcoming
        if soonest is None:
            return self._refresh
        spent = asyncio.get_running_loop().time() - read_at
        return min(max((soonest - now) / timedelta(seconds=1) - spent, 0.0), self._refresh)

    async def _fire_due(self, record: ScheduleRecord, now: datetime) -> datetime | None:
        """Fire ``record`` if due; its ``next_fire`` afterwards (``None``: paused or gone)."""
        try:
            cadence = cadence_of(record)
            plan = plan_fires(cadence, record.next_fire, now, record.catch_up)
        except (ChongmingError, ValueError) as error:  # a row no cadence can be made of
            _log.error("schedule %r cannot be planned (%s); skipped", record.key, error)
            return None
        if plan is None:
            return record.next_fire
        tasks = []
        for tick in plan.fires:
            snapshot, transition = self._build(record, tick)
            tasks.append((snapshot, [transition]))
        fired = await self._store.fire_schedule(
            record.key,
            revision=record.revision,
            decided=plan.decided,
            next_fire=plan.next_fire,
            tasks=tasks,
            last_fired=plan.fires[-1] if plan.fires else None,
        )
        if fired.won:
            self._won += 1
            self._enqueued += fired.created
            if plan.skipped:
                many = " or more" if plan.skipped >= MAX_COUNTED else ""
                _log.info("schedule %r skipped %d%s missed ticks", record.key, plan.skipped, many)
        else:
            self._lost += 1
        current = fired.schedule
        if current is None or current.paused:
            return None
        return current.next_fire
