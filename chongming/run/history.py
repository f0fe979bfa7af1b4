"""A run's history as compact steps, turned into ``Transition`` records on demand.

The hot path appends a tuple of atomic values per transition: cheap to build,
and invisible to the garbage collector once it has seen it. Most runs are
never inspected, so the frozen records are built only when someone reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from chongming.clock import to_datetime
from chongming.state.records import Transition
from chongming.state.status import TaskStatus

__all__ = ["STATUS_VALUE", "Step", "extend_records", "steps_from"]

#: (version, from, to, at, trigger, actor, reason, attempt); statuses as their
#: string values so the tuple holds only atomic objects.
#: ``at`` is float seconds since the epoch.
Step: TypeAlias = tuple[int, str, str, float, str, str, str | None, int]

#: Enum ``.value`` is a slow descriptor on Python 3.11; the hot path looks it up here.
STATUS_VALUE = {status: status.value for status in TaskStatus}


def extend_records(task_id: str, steps: Sequence[Step], records: list[Transition]) -> None:
    """Append to ``records`` the transitions of ``steps`` it does not hold yet."""
    for version, current, target, at, trigger, actor, reason, attempt in steps[len(records) :]:
        records.append(
            Transition(
                task_id=task_id,
                version=version,
                from_status=TaskStatus(current),
                to_status=TaskStatus(target),
                at=to_datetime(at),
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
