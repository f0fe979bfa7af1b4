"""Schedules: stored cadences, fired by a compare-and-set that enqueues in the same decision.

Optional for a third-party store: mix :class:`ScheduleContract` into a
contract subclass only if the backend implements ``fire_schedule``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

from chongming.errors import PayloadError, UnknownSchedule
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.schedules import ScheduleFire, ScheduleRecord, tick_key
from chongming.testing.store_contract._support import (
    ContractBase,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["ScheduleContract"]

_PAST = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
_MINUTE = timedelta(minutes=1)


def _schedule(key: str = "nightly", **fields: object) -> ScheduleRecord:
    base: dict[str, object] = {
        "key": key,
        "task_name": "extract",
        "cron": "*/1 * * * *",
        "timezone": "Europe/Berlin",
        "args": (1, "two"),
        "kwargs": {"k": [3]},
        "next_fire": _PAST,
    }
    base.update(fields)
    return ScheduleRecord(**base)  # type: ignore[arg-type]


def _tick_task(task_id: str, key: str, tick: datetime) -> tuple[TaskSnapshot, list[Transition]]:
    pending = make_snapshot(task_id, args=(1, "two"), idempotency_key=tick_key(key, tick))
    queued, transition = next_step(pending, TaskStatus.QUEUED, trigger="orchestrator:enqueued")
    return dataclasses.replace(queued, queued_at=queued.updated_at), [transition]


class ScheduleContract(ContractBase):
    async def _fire(
        self, store: TaskStore, record: ScheduleRecord, tick: datetime, task_id: str
    ) -> ScheduleFire:
        return await store.fire_schedule(
            record.key,
            revision=record.revision,
            decided=tick,
            next_fire=tick + _MINUTE,
            tasks=[_tick_task(task_id, record.key, tick)],
            last_fired=tick,
        )

    async def test_put_creates_and_a_same_definition_keeps_the_stored_state(self) -> None:
        async with self._store() as store:
            assert await store.schedules() == []
            stored = await store.put_schedule(_schedule())
            assert (stored.key, stored.revision, stored.paused) == ("nightly", 1, False)
            assert stored.args == (1, "two")
            assert stored.kwargs == {"k": [3]}
            assert stored.next_fire == _PAST
            assert stored.next_fire.utcoffset() == timedelta(0)
            again = await store.put_schedule(
                _schedule(next_fire=_PAST + timedelta(days=9), args=[1, "two"], kwargs={"k": (3,)})
            )  # the same definition in another form: a worker restarting changes nothing
            assert again.next_fire == _PAST
            assert again.revision == 1
            assert await store.get_schedule("nightly") == again

    async def test_a_new_definition_takes_its_next_fire_keeps_paused_and_bumps(self) -> None:
        async with self._store() as store:
            await store.put_schedule(_schedule())
            await store.pause_schedule("nightly", paused=True)
            later = _PAST + timedelta(hours=1)
            changed = await store.put_schedule(
                _schedule(cron=None, every=timedelta(seconds=30), next_fire=later)
            )
            assert changed.every == timedelta(seconds=30)
            assert changed.cron is None
            assert changed.next_fire == later
            assert changed.paused
            assert changed.revision == 3

    async def test_a_fire_enqueues_and_advances_once(self) -> None:
        async with self._store() as store:
            record = await store.put_schedule(_schedule())
            fired = await self._fire(store, record, _PAST, "tick-1")
            assert fired.won
            assert fired.created == 1
            assert fired.schedule is not None
            assert fired.schedule.next_fire == _PAST + _MINUTE
            assert fired.schedule.last_fired == _PAST
            assert fired.schedule.revision == record.revision + 1
            task = await store.get("tick-1")
            assert task is not None
            assert task.status is TaskStatus.QUEUED
            assert task.idempotency_key == tick_key("nightly", _PAST)
            assert [t.to_status for t in await store.history("tick-1")] == [TaskStatus.QUEUED]
            stale = await self._fire(store, record, _PAST, "tick-1-again")
            assert not stale.won
            assert stale.created == 0
            assert await store.get("tick-1-again") is None

    async def test_racing_fires_of_one_tick_let_exactly_one_win(self) -> None:
        async with self._store() as store:
            record = await store.put_schedule(_schedule())
            results = await asyncio.gather(
                *(self._fire(store, record, _PAST, f"race-{n}") for n in range(8))
            )
            assert sum(result.won for result in results) == 1
            made = [await store.get(f"race-{n}") for n in range(8)]
            assert sum(task is not None for task in made) == 1
            current = await store.get_schedule("nightly")
            assert current is not None
            assert current.revision == record.revision + 1

    async def test_a_tick_not_yet_due_by_the_store_clock_writes_nothing(self) -> None:
        async with self._store() as store:
            now = await store.schedule_clock()
            assert now.utcoffset() == timedelta(0)
            ahead = now + timedelta(days=1)
            record = await store.put_schedule(_schedule(next_fire=ahead))
            early = await self._fire(store, record, ahead, "early")
            assert not early.won
            assert await store.get("early") is None
            assert await store.get_schedule("nightly") == record

    async def test_a_paused_schedule_fires_nothing_and_resume_moves_it(self) -> None:
        async with self._store() as store:
            await store.put_schedule(_schedule())
            paused = await store.pause_schedule("nightly", paused=True)
            assert paused.paused
            refused = await self._fire(store, paused, _PAST, "while-paused")
            assert not refused.won
            assert await store.get("while-paused") is None
            later = _PAST + timedelta(hours=2)
            resumed = await store.pause_schedule("nightly", paused=False, next_fire=later)
            assert not resumed.paused
            assert resumed.next_fire == later
            assert resumed.revision == paused.revision + 1
            await _raises(UnknownSchedule, store.pause_schedule("nobody", paused=True))

    async def test_a_tick_whose_key_names_a_task_already_creates_no_second(self) -> None:
        async with self._store() as store:
            record = await store.put_schedule(_schedule())
            twin, transitions = _tick_task("first", "nightly", _PAST)
            assert (await store.enqueue(twin, transitions)).created
            fired = await self._fire(store, record, _PAST, "second")
            assert fired.won
            assert fired.created == 0
            assert await store.get("second") is None
            other = dataclasses.replace(_tick_task("third", "nightly", _PAST)[0], args=(9,))
            moved = await store.get_schedule("nightly")
            assert moved is not None
            conflicting = await store.fire_schedule(
                "nightly", revision=moved.revision, decided=_PAST, next_fire=_PAST + _MINUTE,
                tasks=[(other, [])], last_fired=None,
            )  # fmt: skip
            assert conflicting.won
            assert conflicting.created == 0
            assert await store.get("third") is None

    async def test_remove_deletes_the_schedule_not_its_tasks(self) -> None:
        async with self._store() as store:
            record = await store.put_schedule(_schedule())
            await store.put_schedule(_schedule("hourly"))
            await self._fire(store, record, _PAST, "kept")
            assert await store.remove_schedule("nightly")
            assert not await store.remove_schedule("nightly")
            assert [s.key for s in await store.schedules()] == ["hourly"]
            assert await store.get("kept") is not None
            gone = await self._fire(store, record, _PAST + _MINUTE, "after")
            assert not gone.won
            assert gone.schedule is None

    async def test_bad_records_are_refused_and_nothing_is_written(self) -> None:
        async with self._store() as store:
            for bad in (
                _schedule(""),
                _schedule("nul\x00key"),
                _schedule(cron=None),
                _schedule(every=timedelta(seconds=5)),
                _schedule(catch_up="sometimes"),
                _schedule(next_fire=datetime(2026, 1, 1)),
                _schedule(args=(float("nan"),)),
            ):
                await _raises(PayloadError, store.put_schedule(bad))
            assert await store.schedules() == []
            record = await store.put_schedule(_schedule())
            await _raises(
                PayloadError,
                store.fire_schedule(
                    "nightly", revision=record.revision, decided=datetime(2026, 1, 1),
                    next_fire=_PAST, tasks=[], last_fired=None,
                ),
            )  # fmt: skip
            assert await store.get_schedule("nightly") == record
