"""Records of schedules: what fires when, kept in the store for every worker to share.

A schedule is stored once under its ``key`` with its recipe (task name, JSON
arguments), its cadence (a cron expression in a zone, or an interval), its
catch-up policy and its ``next_fire``: the oldest tick not yet decided. Every
change (a fire, a pause, a new definition) bumps ``revision``; a fire is a
compare-and-set on it, so of two workers deciding one tick exactly one wins,
and the winner's enqueue and the schedule's advance are one store decision.

The records and the checks every backend applies alike live here; the
cadence arithmetic does not (stores never compute ticks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming.errors import PayloadError
from chongming.state.payload import check_json_value
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.checks import check_text

__all__ = [
    "MAX_SCHEDULE_KEY",
    "ScheduleFire",
    "ScheduleRecord",
    "check_fire",
    "check_schedule",
    "check_schedule_key",
    "same_definition",
    "tick_key",
]

#: Longest schedule key (characters); the idempotency keys it makes add a timestamp.
MAX_SCHEDULE_KEY = 200
_CATCH_UP = frozenset({"skip", "latest", "all"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    """A schedule as stored: its definition, its state, and ``next_fire`` (aware, UTC)."""

    key: str
    task_name: str
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    catch_up: str = "latest"
    paused: bool = False
    next_fire: datetime
    #: The newest tick fired (``None``: none yet).
    last_fired: datetime | None = None
    #: Bumped by every change; a fire is a compare-and-set on it.
    revision: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFire:
    """What ``fire_schedule`` decided: whether this caller's plan won, and the schedule now."""

    won: bool
    #: Tasks the plan's enqueues created (an idempotency key's twin counts as not created).
    created: int
    schedule: ScheduleRecord | None


def tick_key(key: str, tick: datetime) -> str:
    """The idempotency key of one tick of schedule ``key``: the same on every node."""
    return f"schedule:{key}:{tick.astimezone(UTC).isoformat()}"


def same_definition(a: ScheduleRecord, b: ScheduleRecord) -> bool:
    """Same recipe and cadence (state such as ``next_fire`` and ``paused`` aside)."""
    return (
        a.task_name == b.task_name
        and a.cron == b.cron
        and a.every == b.every
        and a.timezone == b.timezone
        and list(a.args) == list(b.args)
        and dict(a.kwargs) == dict(b.kwargs)
        and a.catch_up == b.catch_up
    )


def check_schedule_key(key: object) -> str:
    if not isinstance(key, str):
        raise PayloadError("schedule key", f"must be a string, got {type(key).__name__}")
    if not key or len(key) > MAX_SCHEDULE_KEY:
        raise PayloadError("schedule key", f"must have 1 to {MAX_SCHEDULE_KEY} characters")
    check_text(key, "schedule key")
    if not key.isprintable():
        raise PayloadError("schedule key", "must not contain control characters")
    return key


def _check_instant(value: object, what: str) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise PayloadError(what, "must be an aware datetime")


def check_schedule(record: object) -> ScheduleRecord:
    """A record a store may write (the cadence itself is checked where it is made)."""
    if not isinstance(record, ScheduleRecord):
        raise PayloadError("schedule", f"must be a ScheduleRecord, got {type(record).__name__}")
    check_schedule_key(record.key)
    check_text(record.task_name, "schedule task name")
    if (record.cron is None) == (record.every is None):
        raise PayloadError("schedule", "needs exactly one of cron and every")
    check_text(record.cron, "schedule cron")
    if record.every is not None and record.every <= timedelta(0):
        raise PayloadError("schedule every", "must be positive")
    check_text(record.timezone, "schedule timezone")
    if record.catch_up not in _CATCH_UP:
        raise PayloadError("schedule catch_up", f"must be one of {sorted(_CATCH_UP)}")
    check_json_value(list(record.args), "schedule args")
    check_json_value(dict(record.kwargs), "schedule kwargs")
    _check_instant(record.next_fire, "schedule next_fire")
    return record


def check_fire(
    key: object,
    revision: object,
    next_fire: object,
    decided: object,
    tasks: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
) -> None:
    """The arguments of ``fire_schedule``, refused alike by every backend."""
    check_schedule_key(key)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise PayloadError("schedule revision", f"must be an integer >= 1, got {revision!r}")
    _check_instant(next_fire, "schedule next_fire")
    _check_instant(decided, "schedule decided tick")
    for snapshot, _ in tasks:
        if not isinstance(snapshot, TaskSnapshot) or snapshot.idempotency_key is None:
            raise PayloadError("schedule fire", "every task of a fire needs its tick's key")
