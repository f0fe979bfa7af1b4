"""A run's history as compact steps, turned into ``Transition`` records on demand.

The hot path appends a tuple of atomic values per transition: cheap to build,
and invisible to the garbage collector once it has seen it. Most runs are
never inspected, so the frozen records are built only when someone reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TypeAlias

from chongming.state.records import Transition
from chongming.state.status import TaskStatus

__all__ = ["STATUS_VALUE", "Step", "extend_records", "steps_from"]

#: (version, from, to, at, trigger, actor, reason, attempt); statuses as their
#: string values so the tuple holds only atomic objects.
#: ``at`` is float seconds since the epoch.
Step: TypeAlias = tuple[int, str, str, float, str, str, str | None, int]

#: Enum ``.value`` is a slow descriptor on Python 3.11; the hot path looks it up here.
STATUS_VALUE = {status: status.value for status in TaskStatus}
#: And back: ``TaskStatus(value)`` is two Python frames (the enum's ``__call__`` and ``__new__``).
_STATUS_OF = {status.value: status for status in TaskStatus}
_from_timestamp = datetime.fromtimestamp


def extend_records(task_id: str, steps: Sequence[Step], records: list[Transition]) -> None:
    """Append to ``records`` the transitions of ``steps`` it does not hold yet."""
    for version, current, target, at, trigger, actor, reason, attempt in steps[len(records) :]:
        records.append(
            Transition(
                task_id=task_id,
                version=version,
                from_status=_STATUS_OF[current],
                to_status=_STATUS_OF[target],
                at=_from_timestamp(at, UTC),  # to_datetime, inline
                trigger=trigger,
                actor=actor,
                reason=reason,
                attempt=attempt,
            )
        )


def steps_from(transitions: Sequence[Transition]) -> list[Step]:
    """Compact steps of stored transitions (a claimed task's history), oldest first."""
    return [
        (
            t.version,
            STATUS_VALUE[t.from_status],
            STATUS_VALUE[t.to_status],
            t.at.timestamp(),
            t.trigger,
            t.actor,
            t.reason,
            t.attempt,
        )
        for t in transitions
    ]
