"""Why a queued task waits: the one answer every view shows beside ``queued``.

A parked durable task, a task enqueued with a future ``not_before`` and one
whose pinned version no live worker serves all look ``queued``; so does the
backlog a worker will claim next. :func:`waiting_reason` tells them apart
from what the store already holds — the journal's ``sleep:`` and
``fact:…:deadline`` steps, ``not_before``, the versions live nodes serve —
and :func:`waiting_reasons` reads those for a page of tasks. ``ps``,
``status`` and the dashboard all go through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from chongming.clock import to_datetime
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.durable import StepRecord
from chongming.stores.nodes import served_by_live_nodes, unserved_key

__all__ = ["WaitingReason", "waiting_reason", "waiting_reasons"]

_SLEEP = "sleep:"
_FACT = "fact:"
_DEADLINE = ":deadline"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WaitingReason:
    """Why a ``queued`` task is not running yet; the fields that apply are set.

    ``sleeping_until``: a durable task parked in ``ctx.sleep``; ``fact``: one
    parked in ``ctx.wait_for_fact`` (``fact_deadline``: when it times out,
    ``None``: never); ``not_before``: enqueued to start no earlier than that;
    ``unserved``: the ``name`` or ``name@N`` no live worker serves.
    """

    sleeping_until: datetime | None = None
    fact: str | None = None
    fact_deadline: datetime | None = None
    not_before: datetime | None = None
    unserved: str | None = None

    def describe(self) -> str:
        """``sleeping until 2026-10-02T14:05:00Z``, ``waiting for fact 'paid', no deadline``, …"""
        parts: list[str] = []
        if self.sleeping_until is not None:
            parts.append(f"sleeping until {_iso(self.sleeping_until)}")
        if self.fact is not None:
            until = (
                ", no deadline"
                if self.fact_deadline is None
                else f" until {_iso(self.fact_deadline)}"
            )
            parts.append(f"waiting for fact {self.fact!r}{until}")
        if self.not_before is not None:
            parts.append(f"not before {_iso(self.not_before)}")
        if self.unserved is not None:
            parts.append(f"no worker serves {self.unserved}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {
            "reason": self.describe(),
            "sleeping_until": _iso(self.sleeping_until),
            "fact": self.fact,
            "fact_deadline": _iso(self.fact_deadline),
            "not_before": _iso(self.not_before),
            "unserved": self.unserved,
        }


def waiting_reason(
    snapshot: TaskSnapshot,
    *,
    now: datetime,
    steps: Sequence[StepRecord] = (),
    served: frozenset[str] | None = None,
) -> WaitingReason | None:
    """Why ``snapshot`` waits, or ``None`` (not queued, claimed, or next in line).

    ``steps``: its journal, oldest first (only read for a task held back by
    ``not_before``); ``served``: what live nodes serve (``None``: not known,
    so not judged). Pure: the caller reads the store.
    """
    if snapshot.status is not TaskStatus.QUEUED or snapshot.owner is not None:
        return None
    sleeping = fact = deadline = held_back = None
    until = snapshot.not_before
    if until is not None and _aware(until) > _aware(now):
        wait = _open_wait(steps)
        if wait is None:
            held_back = until
        elif wait.name.startswith(_SLEEP):
            sleeping = until
        else:
            fact = wait.name[len(_FACT) : -len(_DEADLINE)]
            if isinstance(wait.value, int | float) and not isinstance(wait.value, bool):
                deadline = _when(float(wait.value))
    missing = None if served is None else unserved_key(snapshot, served)
    if sleeping is None and fact is None and held_back is None and missing is None:
        return None
    return WaitingReason(
        sleeping_until=sleeping,
        fact=fact,
        fact_deadline=deadline,
        not_before=held_back,
        unserved=missing,
    )


async def waiting_reasons(
    store: TaskStore | None, snapshots: Iterable[TaskSnapshot], *, now: datetime
) -> dict[str, WaitingReason]:
    """:func:`waiting_reason` of each queued, unowned task in ``snapshots``, by task id.

    One read of the nodes when any such task is listed, and one read of the
    journal for each task held back by ``not_before``.
    """
    waiting = [s for s in snapshots if s.status is TaskStatus.QUEUED and s.owner is None]
    if store is None or not waiting:
        return {}
    served = served_by_live_nodes(await store.nodes())
    found: dict[str, WaitingReason] = {}
    for snapshot in waiting:
        steps: Sequence[StepRecord] = ()
        if snapshot.not_before is not None and _aware(snapshot.not_before) > _aware(now):
            steps = await store.steps(snapshot.task_id)
        reason = waiting_reason(snapshot, now=now, steps=steps, served=served)
        if reason is not None:
            found[snapshot.task_id] = reason
    return found


def _open_wait(steps: Sequence[StepRecord]) -> StepRecord | None:
    """The journal's last sleep or fact deadline that nothing recorded after it ended."""
    wait: StepRecord | None = None
    for step in sorted(steps, key=lambda record: record.seq):
        name = step.name
        is_wait = name.startswith(_SLEEP) or (name.startswith(_FACT) and name.endswith(_DEADLINE))
        # A later step of any kind (the fact's decision among them) means that wait ended.
        wait = step if is_wait else None
    return wait


def _when(seconds: float) -> datetime:
    """A recorded deadline as a datetime; one past year 9999 shows as the last instant."""
    try:
        return to_datetime(seconds)
    except (ValueError, OverflowError, OSError):
        return datetime.max.replace(tzinfo=UTC)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return _aware(value).astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
