"""The in-memory store's schedules: each call atomic on the event loop (nothing awaits)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from chongming.errors import IdempotencyConflict, UnknownSchedule
from chongming.state.payload import dump_json
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.checks import check_transitions
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.schedules import ScheduleStore
from chongming.stores.queue import check_enqueued
from chongming.stores.schedules import (
    ScheduleFire,
    ScheduleRecord,
    check_fire,
    check_schedule,
    check_schedule_key,
    same_definition,
)
from chongming.stores.stored import as_stored

if TYPE_CHECKING:
    from chongming.stores.queue import Enqueued

__all__ = ["SchedulesOnMemory"]


def _stored(record: ScheduleRecord, now: datetime, revision: int) -> ScheduleRecord:
    """The record as every store gives it back: JSON-form arguments, UTC datetimes."""
    return dataclasses.replace(
        record,
        args=tuple(json.loads(dump_json(list(record.args), "schedule args"))),
        kwargs=json.loads(dump_json(dict(record.kwargs), "schedule kwargs")),
        next_fire=record.next_fire.astimezone(UTC),
        last_fired=None if record.last_fired is None else record.last_fired.astimezone(UTC),
        revision=revision,
        created_at=now if record.created_at is None else record.created_at.astimezone(UTC),
        updated_at=now,
    )


class SchedulesOnMemory(MemoryState, ScheduleStore):
    """Schedules in a dict by key."""

    if TYPE_CHECKING:  # the store's work queue (memory/queue.py)

        async def enqueue(
            self,
            snapshot: TaskSnapshot,
            transitions: Sequence[Transition] = (),
            *,
            connection: object | None = None,
            trace_carrier: Mapping[str, str] | None = None,
        ) -> Enqueued: ...

    async def put_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        self._check_open()
        check_schedule(schedule)
        now = self._now()
        current = self._schedules.get(schedule.key)
        if current is None:
            fresh = dataclasses.replace(schedule, created_at=None, last_fired=None)
            stored = self._schedules[schedule.key] = _stored(fresh, now, 1)
            return stored
        if same_definition(current, _stored(schedule, now, 1)):
            return current
        changed = dataclasses.replace(
            schedule,
            paused=current.paused,
            last_fired=current.last_fired,
            created_at=current.created_at,
        )
        stored = self._schedules[schedule.key] = _stored(changed, now, current.revision + 1)
        return stored

    async def get_schedule(self, key: str) -> ScheduleRecord | None:
        self._check_open()
        return self._schedules.get(check_schedule_key(key))

    async def schedules(self) -> list[ScheduleRecord]:
        self._check_open()
        return [self._schedules[key] for key in sorted(self._schedules)]

    async def remove_schedule(self, key: str) -> bool:
        self._check_open()
        return self._schedules.pop(check_schedule_key(key), None) is not None

    async def pause_schedule(
        self, key: str, *, paused: bool, next_fire: datetime | None = None
    ) -> ScheduleRecord:
        self._check_open()
        current = self._schedules.get(check_schedule_key(key))
        if current is None:
            raise UnknownSchedule(key)
        moved = current.next_fire if paused or next_fire is None else next_fire
        stored = self._schedules[key] = _stored(
            dataclasses.replace(current, paused=bool(paused), next_fire=moved),
            self._now(),
            current.revision + 1,
        )
        return stored

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
        self._check_open()
        check_fire(key, revision, next_fire, decided, tasks)
        for snapshot, transitions in tasks:  # every task checked before anything is written
            check_enqueued(snapshot)
            as_stored(snapshot, self._limit)
            check_transitions(transitions)
        now = self._now()
        current = self._schedules.get(key)
        if current is None:
            return ScheduleFire(won=False, created=0, schedule=None)
        if current.revision != revision or current.paused or decided > now:
            return ScheduleFire(won=False, created=0, schedule=current)
        created = 0
        for snapshot, transitions in tasks:  # enqueue never awaits here: still atomic
            try:
                created += (await self.enqueue(snapshot, transitions)).created
            except IdempotencyConflict:
                continue  # the tick's key already names a task: that one is the tick's
        stored = self._schedules[key] = _stored(
            dataclasses.replace(
                current,
                next_fire=next_fire,
                last_fired=current.last_fired if last_fired is None else last_fired,
            ),
            now,
            current.revision + 1,
        )
        return ScheduleFire(won=True, created=created, schedule=stored)

    async def schedule_clock(self) -> datetime:
        self._check_open()
        return self._now()
