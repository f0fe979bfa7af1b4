"""The in-memory store's durable execution: epochs, steps, facts, effects."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Collection
from datetime import datetime
from typing import Any

from chongming.errors import FactConflict, TaskNotFound
from chongming.state.payload import json_form
from chongming.stores.durable import (
    Commit,
    CommitFailed,
    DurableRun,
    EffectState,
    Fact,
    StaleEpoch,
    StepRecord,
    check_begin,
    check_effect,
    check_fact,
    check_step,
    same_fact_value,
)
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.durable import DurableStore

__all__ = ["DurableOnMemory"]


class DurableOnMemory(MemoryState, DurableStore):
    """Fenced steps and effects, set-once facts that wake parked tasks."""

    async def store_time(self) -> datetime:
        self._check_open()
        return self._now()

    async def begin_durable_attempt(self, task_id: str, owner: str, *, max_resumes: int) -> int:
        self._check_open()
        check_begin(task_id, owner, max_resumes)
        task = self._tasks.get(task_id)
        if task is None or task.status.value not in ("starting", "running") or task.owner != owner:
            found = (
                "no such task" if task is None else f"it is {task.status}, owned by {task.owner!r}"
            )
            raise StaleEpoch(task_id, 0, f"an attempt of {owner!r} cannot start ({found})")
        run = self._runs.get(task_id)
        epoch = 1 if run is None else run.epoch + 1
        self._runs[task_id] = DurableRun(task_id=task_id, epoch=epoch, max_resumes=max_resumes)
        return epoch

    async def durable_runs(self, task_ids: Collection[str]) -> dict[str, DurableRun]:
        self._check_open()
        return {task_id: self._runs[task_id] for task_id in task_ids if task_id in self._runs}

    async def record_step(self, task_id: str, epoch: int, step: StepRecord) -> StepRecord:
        self._check_open()
        checked = check_step(task_id, epoch, step, self._limit)
        self._fence(task_id, epoch)
        steps = self._steps.setdefault(task_id, {})
        key = (checked.name, checked.occurrence)
        if key not in steps:
            steps[key] = dataclasses.replace(checked, seq=len(steps) + 1, epoch=epoch)
        return steps[key]

    async def steps(self, task_id: str) -> list[StepRecord]:
        self._check_open()
        return sorted(self._steps.get(task_id, {}).values(), key=lambda step: step.seq)

    async def put_fact(self, fact: Fact) -> bool:
        self._check_open()
        checked = check_fact(fact, self._limit)
        if checked.task_id not in self._tasks:
            raise TaskNotFound(checked.task_id)
        facts = self._facts.setdefault(checked.task_id, {})
        found = facts.get(checked.name)
        if found is not None:
            if not same_fact_value(found.payload, checked.payload):
                raise FactConflict(checked.task_id, checked.name)
            return False
        facts[checked.name] = checked
        self._wake(checked.task_id, checked.name)
        return True

    async def wake_for_fact(self, task_id: str, name: str) -> bool:
        self._check_open()
        return self._wake(task_id, name)

    async def link_child(self, parent_id: str, child_id: str) -> str | None:
        self._check_open()
        if parent_id not in self._tasks:
            raise TaskNotFound(parent_id)
        child = self._tasks.get(child_id)
        if child is None:
            raise TaskNotFound(child_id)
        parent = self._parents.setdefault(child_id, parent_id)
        if child.status.is_terminal:
            self._deliver_end(parent, child)
        return parent

    async def parent_of(self, task_id: str) -> str | None:
        self._check_open()
        return self._parents.get(task_id)

    async def children_of(self, task_id: str) -> list[str]:
        self._check_open()
        return sorted(child for child, parent in self._parents.items() if parent == task_id)

    async def get_fact(self, task_id: str, name: str) -> Fact | None:
        self._check_open()
        return self._facts.get(task_id, {}).get(name)

    async def facts(self, task_id: str) -> list[Fact]:
        self._check_open()
        return [fact for _, fact in sorted(self._facts.get(task_id, {}).items())]

    def _fence(self, task_id: str, epoch: int) -> None:
        run, task = self._runs.get(task_id), self._tasks.get(task_id)
        if run is None or task is None:
            raise StaleEpoch(task_id, epoch, "the task has no durable run")
        if run.epoch != epoch:
            raise StaleEpoch(task_id, epoch, f"epoch {run.epoch} holds it now")
        if not task.status.holds_carrier:
            raise StaleEpoch(task_id, epoch, f"the task is {task.status} (no attempt holds it)")

    async def begin_effect(self, task_id: str, epoch: int, op_key: str) -> EffectState:
        self._check_open()
        check_effect(task_id, epoch, op_key)
        self._fence(task_id, epoch)
        found = self._effects.get((task_id, op_key))
        if found is not None and found[0]:
            return EffectState(done=True, resumed=False, result=found[1])
        self._effects[task_id, op_key] = (False, None)
        return EffectState(done=False, resumed=found is not None)

    async def finish_effect(
        self, task_id: str, epoch: int, op_key: str, result: Any, commit: Commit | None
    ) -> Any:
        """``commit`` gets ``None`` for a connection: this store has no database."""
        self._check_open()
        check_effect(task_id, epoch, op_key)
        value = json_form(result, f"the result of operation {op_key!r}", self._limit)
        self._fence(task_id, epoch)
        found = self._effects.get((task_id, op_key))
        if found is not None and found[0]:
            return found[1]
        if commit is not None:
            try:
                outcome = commit(None, value)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as error:
                raise CommitFailed(op_key, error) from error
        self._effects[task_id, op_key] = (True, value)
        return value
