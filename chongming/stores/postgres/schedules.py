"""Schedules on PostgreSQL: a fire is one transaction that locks the schedule's row.

``fire_schedule`` takes the row ``FOR UPDATE``, compares its revision, judges
"due" by the server's ``clock_timestamp()``, enqueues the tick's tasks on the
same connection (the store's own ``enqueue(connection=...)``, each under a
savepoint) and advances ``next_fire``, then commits: of two workers firing one
tick, the second waits for the first's commit, sees the new revision and
writes nothing.

Every statement is safe to run again after a connection error with an unknown
outcome (a repeated fire loses the compare-and-set), so the read runner's
bounded retry serves them all.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from chongming.errors import IdempotencyConflict, UnknownSchedule
from chongming.state.payload import dump_json
from chongming.state.records import TaskSnapshot, Transition

if TYPE_CHECKING:
    from chongming.stores.queue import Enqueued
from chongming.stores.schedules import (
    ScheduleFire,
    ScheduleRecord,
    check_fire,
    check_schedule,
    check_schedule_key,
    same_definition,
)

__all__ = ["ScheduleMethods"]

_COLUMNS = (
    "key, task_name, cron, every_micros, timezone, args::text AS args, kwargs::text AS kwargs,"
    " catch_up, paused, next_fire, last_fired, revision, created_at, updated_at"
)
_MICRO = timedelta(microseconds=1)


def _record(row: Any) -> ScheduleRecord:
    every = row["every_micros"]
    return ScheduleRecord(
        key=row["key"],
        task_name=row["task_name"],
        cron=row["cron"],
        every=None if every is None else timedelta(microseconds=every),
        timezone=row["timezone"],
        args=tuple(json.loads(row["args"])),
        kwargs=json.loads(row["kwargs"]),
        catch_up=row["catch_up"],
        paused=row["paused"],
        next_fire=row["next_fire"],
        last_fired=row["last_fired"],
        revision=row["revision"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _definition(record: ScheduleRecord) -> tuple[Any, ...]:
    return (
        record.task_name,
        record.cron,
        None if record.every is None else record.every // _MICRO,
        record.timezone,
        dump_json(list(record.args), "schedule args"),
        dump_json(dict(record.kwargs), "schedule kwargs"),
        record.catch_up,
    )


class ScheduleMethods:
    """The store port's schedule methods for :class:`PostgresTaskStore`."""

    _schema: str
    _schedule_sql: dict[str, str] | None = None

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    if TYPE_CHECKING:  # the store's work queue (postgres/queue.py)

        async def enqueue(
            self,
            snapshot: TaskSnapshot,
            transitions: Sequence[Transition] = (),
            *,
            connection: object | None = None,
            trace_carrier: Any = None,
        ) -> Enqueued: ...

    @property
    def _sched(self) -> dict[str, str]:
        if self._schedule_sql is None:
            from chongming.stores.postgres.schema import quote_schema

            table = f"{quote_schema(self._schema)}.schedules"
            self._schedule_sql = {
                "get": f"SELECT {_COLUMNS} FROM {table} WHERE key = $1",
                "lock": f"SELECT {_COLUMNS}, clock_timestamp() AS now FROM {table}"
                " WHERE key = $1 FOR UPDATE",
                "all": f"SELECT {_COLUMNS} FROM {table} ORDER BY key",
                "insert": f"INSERT INTO {table} (key, task_name, cron, every_micros, timezone,"
                " args, kwargs, catch_up, paused, next_fire, revision)"
                " VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, 1)"
                " ON CONFLICT (key) DO NOTHING RETURNING key",
                "change": f"UPDATE {table} SET task_name = $2, cron = $3, every_micros = $4,"
                " timezone = $5, args = $6::jsonb, kwargs = $7::jsonb, catch_up = $8,"
                " next_fire = $9, revision = revision + 1, updated_at = clock_timestamp()"
                " WHERE key = $1",
                "pause": f"UPDATE {table} SET paused = $2, next_fire = coalesce($3, next_fire),"
                " revision = revision + 1, updated_at = clock_timestamp() WHERE key = $1"
                " RETURNING key",
                "advance": f"UPDATE {table} SET next_fire = $2,"
                " last_fired = coalesce($3, last_fired), revision = revision + 1,"
                " updated_at = clock_timestamp() WHERE key = $1",
                "remove": f"DELETE FROM {table} WHERE key = $1 RETURNING key",
            }
        return self._schedule_sql

    async def put_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        record = check_schedule(schedule)
        sql = self._sched
        definition = _definition(record)
        as_stored = dataclasses.replace(  # in the JSON form the row gives back
            record, args=tuple(json.loads(definition[4])), kwargs=json.loads(definition[5])
        )

        async def put(conn: Any) -> ScheduleRecord:
            async with conn.transaction():
                inserted = await conn.fetchval(
                    sql["insert"], record.key, *definition, record.paused, record.next_fire
                )
                if inserted is None:
                    current = _record(await conn.fetchrow(sql["lock"], record.key))
                    if not same_definition(current, as_stored):
                        await conn.execute(sql["change"], record.key, *definition, record.next_fire)
                return _record(await conn.fetchrow(sql["get"], record.key))

        stored: ScheduleRecord = await self._read(f"putting schedule {record.key!r}", put)
        return stored

    async def get_schedule(self, key: str) -> ScheduleRecord | None:
        sql = self._sched["get"]
        row = await self._read(
            f"reading schedule {key!r}", lambda c: c.fetchrow(sql, check_schedule_key(key))
        )
        return None if row is None else _record(row)

    async def schedules(self) -> list[ScheduleRecord]:
        sql = self._sched["all"]
        found = await self._read("reading schedules", lambda c: c.fetch(sql))
        return [_record(row) for row in found]

    async def remove_schedule(self, key: str) -> bool:
        sql = self._sched["remove"]
        gone = await self._read(
            f"removing schedule {key!r}", lambda c: c.fetchval(sql, check_schedule_key(key))
        )
        return gone is not None

    async def pause_schedule(
        self, key: str, *, paused: bool, next_fire: datetime | None = None
    ) -> ScheduleRecord:
        check_schedule_key(key)
        sql = self._sched
        moved = None if paused or next_fire is None else next_fire

        async def pause(conn: Any) -> ScheduleRecord:
            async with conn.transaction():
                if await conn.fetchval(sql["pause"], key, bool(paused), moved) is None:
                    raise UnknownSchedule(key)
                return _record(await conn.fetchrow(sql["get"], key))

        stored: ScheduleRecord = await self._read(f"pausing schedule {key!r}", pause)
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
        check_fire(key, revision, next_fire, decided, tasks)
        sql = self._sched

        async def fire(conn: Any) -> ScheduleFire:
            async with conn.transaction():
                row = await conn.fetchrow(sql["lock"], key)
                if row is None:
                    return ScheduleFire(won=False, created=0, schedule=None)
                current = _record(row)
                if current.revision != revision or current.paused or decided > row["now"]:
                    return ScheduleFire(won=False, created=0, schedule=current)
                created = 0
                for snapshot, transitions in tasks:
                    try:
                        enqueued = await self.enqueue(snapshot, transitions, connection=conn)
                    except IdempotencyConflict:
                        continue  # the tick's key already names a task: that one is the tick's
                    created += enqueued.created
                await conn.execute(sql["advance"], key, next_fire, last_fired)
                stored = _record(await conn.fetchrow(sql["get"], key))
            return ScheduleFire(won=True, created=created, schedule=stored)

        fired: ScheduleFire = await self._read(f"firing schedule {key!r}", fire)
        return fired

    async def schedule_clock(self) -> datetime:
        now: datetime = await self._read(
            "reading the store clock", lambda c: c.fetchval("SELECT clock_timestamp()")
        )
        return now
