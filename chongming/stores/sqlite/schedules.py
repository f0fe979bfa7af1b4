"""Schedules on SQLite (blocking: the writer's thread, inside its ``BEGIN IMMEDIATE``).

``BEGIN IMMEDIATE`` serialises every writer on the file, so a fire reads the
schedule's revision, enqueues the tick's tasks (``queue.enqueue``, under its
savepoint) and advances the schedule with no other process in between: of two
workers firing one tick, exactly one wins and the other writes nothing. "Due"
is judged by the store clock (``now``: the wall clock raised to the file's
high-water mark, so a node whose clock stepped back never judges a tick due
again, and never twice).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from chongming.errors import IdempotencyConflict, UnknownSchedule
from chongming.state.payload import dump_json
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.checks import check_transitions
from chongming.stores.ports.schedules import ScheduleStore
from chongming.stores.queue import check_enqueued, input_digest
from chongming.stores.schedules import (
    ScheduleFire,
    ScheduleRecord,
    check_fire,
    check_schedule,
    check_schedule_key,
    same_definition,
)
from chongming.stores.sqlite import queue, rows
from chongming.stores.sqlite.internals import SqliteInternals

__all__ = ["ACTIONS", "SchedulesOnSqlite", "run_action"]

#: The writer actions this module answers (all read the store clock).
ACTIONS = frozenset(
    {"schedule_put", "schedule_pause", "schedule_fire", "schedule_remove", "schedule_clock"}
)

_COLUMNS = (
    "key, task_name, cron, every_micros, timezone, args, kwargs, catch_up, paused,"
    " next_fire, last_fired, revision, created_at, updated_at"
)
_SELECT = f"SELECT {_COLUMNS} FROM schedules"
_INSERT = f"INSERT INTO schedules ({_COLUMNS}) VALUES ({', '.join('?' * 14)})"
_REPLACE = f"INSERT OR REPLACE INTO schedules ({_COLUMNS}) VALUES ({', '.join('?' * 14)})"
_ADVANCE = (
    "UPDATE schedules SET next_fire = ?, last_fired = coalesce(?, last_fired),"
    " revision = revision + 1, updated_at = ? WHERE key = ? AND revision = ?"
)
_PAUSE = (
    "UPDATE schedules SET paused = ?, next_fire = coalesce(?, next_fire),"
    " revision = revision + 1, updated_at = ? WHERE key = ?"
)


def _micros(value: datetime | None) -> int | None:
    return None if value is None else rows.to_micros(value)


def _when(value: int | None) -> datetime | None:
    return None if value is None else rows.from_micros(value)


def schedule_row(record: ScheduleRecord, revision: int, created: int, now: int) -> tuple[Any, ...]:
    every = None if record.every is None else record.every // timedelta(microseconds=1)
    return (
        record.key,
        record.task_name,
        record.cron,
        every,
        record.timezone,
        dump_json(list(record.args), "schedule args"),
        dump_json(dict(record.kwargs), "schedule kwargs"),
        record.catch_up,
        int(record.paused),
        rows.to_micros(record.next_fire),
        _micros(record.last_fired),
        revision,
        created,
        now,
    )


def schedule_from_row(row: Sequence[Any]) -> ScheduleRecord:
    return ScheduleRecord(
        key=row[0],
        task_name=row[1],
        cron=row[2],
        every=None if row[3] is None else timedelta(microseconds=row[3]),
        timezone=row[4],
        args=tuple(json.loads(row[5])),
        kwargs=json.loads(row[6]),
        catch_up=row[7],
        paused=bool(row[8]),
        next_fire=rows.from_micros(row[9]),
        last_fired=_when(row[10]),
        revision=int(row[11]),
        created_at=rows.from_micros(row[12]),
        updated_at=rows.from_micros(row[13]),
    )


def _get(conn: sqlite3.Connection, key: str) -> ScheduleRecord | None:
    found = conn.execute(f"{_SELECT} WHERE key = ?", (key,)).fetchone()
    return None if found is None else schedule_from_row(found)


def run_action(conn: sqlite3.Connection, action: str, params: tuple[Any, ...], now: int) -> Any:
    if action == "schedule_put":
        (record,) = params
        return _put(conn, record, now)
    if action == "schedule_pause":
        key, paused, next_fire = params
        if conn.execute(_PAUSE, (int(paused), next_fire, now, key)).rowcount != 1:
            raise UnknownSchedule(key)
        return _get(conn, key)
    if action == "schedule_fire":
        return _fire(conn, *params, now=now)
    if action == "schedule_remove":
        (key,) = params
        return conn.execute("DELETE FROM schedules WHERE key = ?", (key,)).rowcount == 1
    if action == "schedule_clock":
        return now
    raise TypeError(f"unknown schedule action {action!r}")


def _put(conn: sqlite3.Connection, record: ScheduleRecord, now: int) -> ScheduleRecord | None:
    current = _get(conn, record.key)
    if current is None:
        conn.execute(_INSERT, schedule_row(record, 1, now, now))
    elif same_definition(current, schedule_from_row(schedule_row(record, 1, now, now))):
        return current
    else:
        kept = dataclasses.replace(record, paused=current.paused, last_fired=current.last_fired)
        created = rows.to_micros(current.created_at) if current.created_at else now
        conn.execute(_REPLACE, schedule_row(kept, current.revision + 1, created, now))
    return _get(conn, record.key)


def _fire(
    conn: sqlite3.Connection,
    key: str,
    revision: int,
    decided: int,
    next_fire: int,
    tasks: Sequence[tuple[Any, ...]],
    last_fired: int | None,
    *,
    now: int,
) -> ScheduleFire:
    current = _get(conn, key)
    if current is None:
        return ScheduleFire(won=False, created=0, schedule=None)
    if current.revision != revision or current.paused or decided > now:
        return ScheduleFire(won=False, created=0, schedule=current)
    created = 0
    conn.execute("SAVEPOINT chongming_fire")  # all of the fire or none of it, whatever the batch
    try:
        for params in tasks:
            try:
                inserted, _ = queue.enqueue(conn, *params, read_back=False)
            except IdempotencyConflict:
                continue  # the tick's key already names a task: that one is the tick's
            created += inserted
        conn.execute(_ADVANCE, (next_fire, last_fired, now, key, revision))
    except BaseException:
        conn.execute("ROLLBACK TO chongming_fire")
        conn.execute("RELEASE chongming_fire")
        raise
    conn.execute("RELEASE chongming_fire")
    return ScheduleFire(won=True, created=created, schedule=_get(conn, key))


class SchedulesOnSqlite(SqliteInternals, ScheduleStore):
    """The store port's schedule methods: each one op in the writer's transaction."""

    async def put_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        stored: ScheduleRecord = await self._node_op("schedule_put", check_schedule(schedule))
        return stored

    async def get_schedule(self, key: str) -> ScheduleRecord | None:
        found = list(await self._read(f"{_SELECT} WHERE key = ?", (check_schedule_key(key),)))
        return schedule_from_row(found[0]) if found else None

    async def schedules(self) -> list[ScheduleRecord]:
        return [schedule_from_row(row) for row in await self._read(f"{_SELECT} ORDER BY key")]

    async def remove_schedule(self, key: str) -> bool:
        removed: bool = await self._node_op("schedule_remove", check_schedule_key(key))
        return removed

    async def pause_schedule(
        self, key: str, *, paused: bool, next_fire: datetime | None = None
    ) -> ScheduleRecord:
        moved = None if paused or next_fire is None else rows.to_micros(next_fire)
        stored: ScheduleRecord = await self._node_op(
            "schedule_pause", check_schedule_key(key), bool(paused), moved
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
        check_fire(key, revision, next_fire, decided, tasks)
        encoded = []
        for snapshot, transitions in tasks:
            check_enqueued(snapshot)
            check_transitions(transitions, snapshot.task_id)
            row = rows.encode(rows.insert_row, snapshot, self._limit)
            encoded.append(
                (
                    row,
                    [rows.transition_row(t) for t in transitions],
                    snapshot.task_id,
                    snapshot.idempotency_key,
                    input_digest(snapshot),
                )
            )
        fired: ScheduleFire = await self._node_op(
            "schedule_fire",
            key,
            revision,
            rows.to_micros(decided),
            rows.to_micros(next_fire),
            encoded,
            _micros(last_fired),
        )
        if fired.created:
            self._wake_hint_waiters()
        return fired

    async def schedule_clock(self) -> datetime:
        return rows.from_micros(await self._guarded_now())
