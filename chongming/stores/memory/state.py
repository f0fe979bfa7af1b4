"""The in-memory store's state and the helpers every capability uses."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from chongming.errors import StoreClosed
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.children import child_end, child_fact_name
from chongming.stores.durable import DurableRun, Fact, StepRecord
from chongming.stores.nodes import Command, NodeRecord
from chongming.stores.rates import RateLimit
from chongming.stores.schedules import ScheduleRecord
from chongming.stores.stored import utc_transition

__all__ = ["MemoryState"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


class MemoryState:
    """The dicts every capability of the in-memory store reads and writes."""

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = _utc_now,
        max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self._clock = clock
        self._limit = check_limit(max_payload_bytes)
        self._tasks: dict[str, TaskSnapshot] = {}
        self._keys: dict[str, tuple[str, str]] = {}  # idempotency key -> (task id, digest)
        self._carriers: dict[str, dict[str, str]] = {}  # task id -> its enqueue's trace carrier
        self._history: dict[str, dict[int, Transition]] = {}
        self._nodes: dict[str, NodeRecord] = {}
        self._commands: dict[str, Command] = {}
        self._outcomes: dict[str, tuple[str | None, datetime]] = {}
        self._cluster_limits: dict[str, int] = {}
        self._slots: dict[tuple[str, str], tuple[str, int]] = {}  # (limit, owner) -> (inc, held)
        self._rate_limits: dict[str, RateLimit] = {}
        self._rate_tats: dict[tuple[str, str], float] = {}  # (limit, key) -> its TAT
        self._runs: dict[str, DurableRun] = {}
        self._steps: dict[str, dict[tuple[str, int], StepRecord]] = {}
        self._facts: dict[str, dict[str, Fact]] = {}
        self._effects: dict[tuple[str, str], tuple[bool, Any]] = {}  # -> (done, result)
        self._schedules: dict[str, ScheduleRecord] = {}
        self._parents: dict[str, str] = {}  # child task id -> its parent's (ctx.child)
        self._hint: asyncio.Event | None = None
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("InMemoryTaskStore")

    def _now(self) -> datetime:
        return _utc(self._clock())

    def _append(self, transitions: Sequence[Transition]) -> None:
        for transition in transitions:
            versions = self._history.setdefault(transition.task_id, {})
            versions.setdefault(transition.version, utc_transition(transition))

    def _stored(self, snapshot: TaskSnapshot) -> None:
        """Every write of a task row ends here: a child's end is its parent's fact at once."""
        task_id = snapshot.task_id
        self._tasks[task_id] = snapshot
        if snapshot.status.is_terminal:
            parent = self._parents.get(task_id)
            if parent is not None:
                self._deliver_end(parent, snapshot)
        elif snapshot.status is TaskStatus.QUEUED and task_id in self._facts:
            self._wake_park(snapshot)

    def _wake_park(self, task: TaskSnapshot) -> None:
        """A park written after a fact it waits for came wakes at once (no later call has to).

        One pass over the task's steps, however many facts it has (a parent of
        a thousand children parks up to a thousand times).
        """
        if task.owner is not None or task.not_before is None:
            return
        facts = self._facts[task.task_id]
        waits: Counter[str] = Counter()
        for step_name, _ in self._steps.get(task.task_id, {}):
            if step_name.startswith("fact:"):
                waits[step_name] += 1
        for name in facts:
            if waits[f"fact:{name}:deadline"] > waits[f"fact:{name}"]:
                self._tasks[task.task_id] = dataclasses.replace(task, not_before=None)
                return

    def _deliver_end(self, parent: str, child: TaskSnapshot) -> None:
        """The child's end as the parent's fact ``child:<id>`` (set once), and wake the parent."""
        if parent not in self._tasks:
            return
        name = child_fact_name(child.task_id)
        facts = self._facts.setdefault(parent, {})
        if name not in facts:
            facts[name] = Fact(task_id=parent, name=name, payload=child_end(child))
        self._wake(parent, name)

    def _wake(self, task_id: str, name: str) -> bool:
        task = self._tasks.get(task_id)
        if (
            task is None
            or task.status is not TaskStatus.QUEUED
            or task.owner is not None
            or task.not_before is None
            or name not in self._facts.get(task_id, {})
        ):
            return False
        steps = self._steps.get(task_id, {})
        deadlines = sum(1 for step_name, _ in steps if step_name == f"fact:{name}:deadline")
        decided = sum(1 for step_name, _ in steps if step_name == f"fact:{name}")
        if deadlines <= decided:
            return False
        self._tasks[task_id] = dataclasses.replace(task, not_before=None)
        return True

    def _own_node(self, owner: str, incarnation: str) -> NodeRecord | None:
        current = self._nodes.get(owner)
        if current is None or current.info.incarnation != incarnation:
            return None
        return current
