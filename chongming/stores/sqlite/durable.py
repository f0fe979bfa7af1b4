"""Durable execution on SQLite (blocking: the writer's thread, inside its ``BEGIN IMMEDIATE``).

``BEGIN IMMEDIATE`` holds the file's write lock for the whole decision, so
"is this epoch still the task's, and does the task still hold a carrier?"
and the insert of the step are one step no other process can come between.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming.errors import ConfigurationError, FactConflict, TaskNotFound
from chongming.state.payload import json_form
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import CARRIER_STATUSES, TERMINAL_STATUSES
from chongming.stores.children import SpawnedChild
from chongming.stores.codec import dump
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
    check_enqueue_facts,
    check_fact,
    check_step,
    same_fact_value,
)
from chongming.stores.ports.durable import DurableStore
from chongming.stores.queue import Enqueued
from chongming.stores.sqlite import queue
from chongming.stores.sqlite.internals import SqliteInternals
from chongming.stores.sqlite.rows import from_micros

__all__ = ["ACTIONS", "DurableOnSqlite", "run_action"]

#: The writer actions this module answers.
ACTIONS = frozenset(
    {
        "durable_begin",
        "step_record",
        "fact_put",
        "fact_wake",
        "effect_begin",
        "effect_finish",
        "child_link",
        "child_spawn",
        "steps_record",
    }
)

_ATTEMPT_MAY_START = ("starting", "running")
_CARRIERS = tuple(sorted(status.value for status in CARRIER_STATUSES))
_STEP_COLUMNS = "name, occurrence, ok, value, seq, epoch, after_name, after_occurrence"
_SELECT_STEPS = f"SELECT {_STEP_COLUMNS} FROM durable_steps WHERE task_id = ? ORDER BY seq"
_SELECT_RUNS = (
    "SELECT task_id, epoch, max_resumes FROM durable_runs"
    " WHERE task_id IN (SELECT value FROM json_each(?))"
)


def _step_from_row(row: Sequence[Any]) -> StepRecord:
    return StepRecord(
        name=row[0],
        occurrence=row[1],
        ok=bool(row[2]),
        value=json.loads(row[3]),
        seq=row[4],
        epoch=row[5],
        after=None if row[6] is None else (row[6], row[7]),
    )


def _run_from_row(row: Sequence[Any]) -> DurableRun:
    return DurableRun(task_id=row[0], epoch=row[1], max_resumes=row[2])


_SELECT_FACTS = "SELECT name, payload, key FROM durable_facts WHERE task_id = ?"


def _fact_from_row(task_id: str, row: Sequence[Any]) -> Fact:
    return Fact(task_id=task_id, name=row[0], payload=json.loads(row[1]), key=row[2])


def _put_fact(conn: sqlite3.Connection, fact: Fact, *, now: int) -> bool:
    if conn.execute("SELECT 1 FROM tasks WHERE task_id = ?", (fact.task_id,)).fetchone() is None:
        raise TaskNotFound(fact.task_id)
    found = conn.execute(
        "SELECT payload FROM durable_facts WHERE task_id = ? AND name = ?",
        (fact.task_id, fact.name),
    ).fetchone()
    if found is not None:
        if not same_fact_value(json.loads(found[0]), fact.payload):
            raise FactConflict(fact.task_id, fact.name)
        return False
    conn.execute(
        "INSERT INTO durable_facts (task_id, name, payload, key, sent_at) VALUES (?, ?, ?, ?, ?)",
        (fact.task_id, fact.name, dump(fact.payload), fact.key, now),
    )
    _wake(conn, fact.task_id, fact.name)
    return True


#: A task parked waiting for the fact (more deadlines of it recorded than
#: decisions), with the fact present: claimable now instead of at its deadline.
_WAKE = (
    "UPDATE tasks SET not_before = NULL"
    " WHERE task_id = ?1 AND status = 'queued' AND owner IS NULL AND not_before IS NOT NULL"
    " AND EXISTS (SELECT 1 FROM durable_facts WHERE task_id = ?1 AND name = ?2)"
    " AND (SELECT count(*) FROM durable_steps WHERE task_id = ?1 AND name = ?3)"
    " > (SELECT count(*) FROM durable_steps WHERE task_id = ?1 AND name = ?4)"
)


def _wake(conn: sqlite3.Connection, task_id: str, name: str) -> bool:
    params = (task_id, name, f"fact:{name}:deadline", f"fact:{name}")
    return conn.execute(_WAKE, params).rowcount == 1


def _link_child(conn: sqlite3.Connection, parent_id: str, child_id: str) -> str:
    """Set the child's parent once; a child already ended delivers its end now.

    ``SET status = status`` fires the child-end trigger (migration 0013) on the
    ended row, in this transaction: the same fact its terminal write makes.
    """
    if conn.execute("SELECT 1 FROM tasks WHERE task_id = ?", (parent_id,)).fetchone() is None:
        raise TaskNotFound(parent_id)
    linked = conn.execute(
        "UPDATE tasks SET parent_id = coalesce(parent_id, ?) WHERE task_id = ? RETURNING parent_id",
        (parent_id, child_id),
    ).fetchone()
    if linked is None:
        raise TaskNotFound(child_id)
    conn.execute(
        f"UPDATE tasks SET status = status WHERE task_id = ? AND status IN ({_ENDED})", (child_id,)
    )
    parent: str = linked[0]
    return parent


_ENDED = ", ".join(f"'{status.value}'" for status in sorted(TERMINAL_STATUSES))


def _spawn_child(
    conn: sqlite3.Connection,
    parent_id: str,
    epoch: int,
    step: StepRecord,
    enqueue_params: tuple[Any, ...],
    *,
    now: int,
) -> tuple[bool, TaskSnapshot, str, StepRecord | None]:
    """Fence, enqueue, link, record: all or none of it (``DurableStore.spawn_child``)."""
    conn.execute("SAVEPOINT chongming_spawn")
    try:
        _fence(conn, parent_id, epoch)  # a stale attempt enqueues nothing
        created, stored = queue.enqueue(conn, *enqueue_params, now=now)
        parent = _link_child(conn, parent_id, stored.task_id)
        recorded = None
        if parent == parent_id:
            child_step = dataclasses.replace(step, value=stored.task_id)
            recorded = _record(conn, parent_id, epoch, child_step, now=now)
    except BaseException:
        conn.execute("ROLLBACK TO chongming_spawn")
        conn.execute("RELEASE chongming_spawn")
        raise
    conn.execute("RELEASE chongming_spawn")
    return created, stored, parent, recorded


def run_action(conn: sqlite3.Connection, action: str, params: tuple[Any, ...], now: int) -> Any:
    if action == "durable_begin":
        return _begin(conn, *params, now=now)
    if action == "step_record":
        return _record(conn, *params, now=now)
    if action == "steps_record":
        return _record_all(conn, *params, now=now)
    if action == "fact_put":
        return _put_fact(conn, *params, now=now)
    if action == "fact_wake":
        return _wake(conn, *params)
    if action == "child_link":
        return _link_child(conn, *params)
    if action == "child_spawn":
        return _spawn_child(conn, *params, now=now)
    if action == "effect_begin":
        return _begin_effect(conn, *params, now=now)
    if action == "effect_finish":
        return _finish_effect(conn, *params, now=now)
    raise TypeError(f"unknown durable action {action!r}")


def _begin(
    conn: sqlite3.Connection, task_id: str, owner: str, max_resumes: int, *, now: int
) -> int:
    row = conn.execute("SELECT status, owner FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    if row is None or row[0] not in _ATTEMPT_MAY_START or row[1] != owner:
        found = "no such task" if row is None else f"it is {row[0]}, owned by {row[1]!r}"
        raise StaleEpoch(task_id, 0, f"an attempt of {owner!r} cannot start ({found})")
    (epoch,) = conn.execute(
        "INSERT INTO durable_runs (task_id, epoch, max_resumes, updated_at) VALUES (?, 1, ?, ?)"
        " ON CONFLICT (task_id) DO UPDATE SET epoch = epoch + 1,"
        " max_resumes = excluded.max_resumes, updated_at = excluded.updated_at"
        " RETURNING epoch",
        (task_id, max_resumes, now),
    ).fetchone()
    return int(epoch)


def _fence(conn: sqlite3.Connection, task_id: str, epoch: int) -> None:
    row = conn.execute(
        "SELECT r.epoch, t.status FROM durable_runs r JOIN tasks t ON t.task_id = r.task_id"
        " WHERE r.task_id = ?",
        (task_id,),
    ).fetchone()
    if row is None:
        raise StaleEpoch(task_id, epoch, "the task has no durable run")
    if row[0] != epoch:
        raise StaleEpoch(task_id, epoch, f"epoch {row[0]} holds it now")
    if row[1] not in _CARRIERS:
        raise StaleEpoch(task_id, epoch, f"the task is {row[1]} (no attempt holds it)")


_EFFECT = "SELECT state, result FROM durable_effects WHERE task_id = ? AND op_key = ?"


def _begin_effect(
    conn: sqlite3.Connection, task_id: str, epoch: int, op_key: str, *, now: int
) -> EffectState:
    _fence(conn, task_id, epoch)
    found = conn.execute(_EFFECT, (task_id, op_key)).fetchone()
    if found is not None and found[0] == "done":
        return EffectState(done=True, resumed=False, result=json.loads(found[1]))
    if found is None:
        conn.execute(
            "INSERT INTO durable_effects (task_id, op_key, state, epoch, started_at)"
            " VALUES (?, ?, 'started', ?, ?)",
            (task_id, op_key, epoch, now),
        )
        return EffectState(done=False, resumed=False)
    conn.execute(
        "UPDATE durable_effects SET epoch = ?, started_at = ? WHERE task_id = ? AND op_key = ?",
        (epoch, now, task_id, op_key),
    )
    return EffectState(done=False, resumed=True)


def _finish_effect(
    conn: sqlite3.Connection,
    task_id: str,
    epoch: int,
    op_key: str,
    result: Any,
    commit: Commit | None,
    *,
    now: int,
) -> Any:
    _fence(conn, task_id, epoch)
    found = conn.execute(_EFFECT, (task_id, op_key)).fetchone()
    if found is not None and found[0] == "done":
        return json.loads(found[1])
    conn.execute("SAVEPOINT chongming_effect")
    try:
        if commit is not None:
            try:
                outcome = commit(conn, result)
                if inspect.isawaitable(outcome):
                    close = getattr(outcome, "close", None)
                    if close is not None:
                        close()  # never awaited: say so instead of a warning
                    raise TypeError(
                        "on SQLite the commit runs on the store's writer thread with a "
                        "sqlite3.Connection: pass a plain function, not a coroutine function"
                    )
            except Exception as error:
                raise CommitFailed(op_key, error) from error
        conn.execute(
            "INSERT INTO durable_effects (task_id, op_key, state, result, epoch, started_at,"
            " done_at) VALUES (?, ?, 'done', ?, ?, ?, ?) ON CONFLICT (task_id, op_key) DO UPDATE"
            " SET state = 'done', result = excluded.result, epoch = excluded.epoch,"
            " done_at = excluded.done_at",
            (task_id, op_key, dump(result), epoch, now, now),
        )
    except BaseException:
        conn.execute("ROLLBACK TO chongming_effect")
        conn.execute("RELEASE chongming_effect")
        raise
    conn.execute("RELEASE chongming_effect")
    return result


def _record(
    conn: sqlite3.Connection, task_id: str, epoch: int, step: StepRecord, *, now: int
) -> StepRecord:
    _fence(conn, task_id, epoch)
    found = conn.execute(
        f"SELECT {_STEP_COLUMNS} FROM durable_steps"
        " WHERE task_id = ? AND name = ? AND occurrence = ?",
        (task_id, step.name, step.occurrence),
    ).fetchone()
    if found is not None:
        return _step_from_row(found)
    (seq,) = conn.execute(
        "SELECT coalesce(max(seq), 0) + 1 FROM durable_steps WHERE task_id = ?", (task_id,)
    ).fetchone()
    after_name, after_occurrence = (None, None) if step.after is None else step.after
    conn.execute(
        "INSERT INTO durable_steps (task_id, name, occurrence, seq, ok, value, epoch, recorded_at,"
        " after_name, after_occurrence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            task_id,
            step.name,
            step.occurrence,
            seq,
            int(step.ok),
            dump(step.value),
            epoch,
            now,
            after_name,
            after_occurrence,
        ),
    )
    return dataclasses.replace(step, seq=seq, epoch=epoch)


def _record_all(
    conn: sqlite3.Connection, task_id: str, epoch: int, steps: Sequence[StepRecord], *, now: int
) -> list[StepRecord]:
    """Every one of ``steps`` or none (each fenced: the first refusal undoes the rest)."""
    conn.execute("SAVEPOINT chongming_steps")
    try:
        stored = [_record(conn, task_id, epoch, step, now=now) for step in steps]
    except BaseException:
        conn.execute("ROLLBACK TO chongming_steps")
        conn.execute("RELEASE chongming_steps")
        raise
    conn.execute("RELEASE chongming_steps")
    return stored


class DurableOnSqlite(SqliteInternals, DurableStore):
    """The store port's durable methods: decisions in the writer's transaction, reads apart."""

    async def store_time(self) -> datetime:
        return from_micros(await self._guarded_now())

    async def begin_durable_attempt(self, task_id: str, owner: str, *, max_resumes: int) -> int:
        check_begin(task_id, owner, max_resumes)
        epoch: int = await self._node_op("durable_begin", task_id, owner, max_resumes)
        return epoch

    async def durable_runs(self, task_ids: Collection[str]) -> dict[str, DurableRun]:
        if not task_ids:
            return {}
        found = await self._read(_SELECT_RUNS, (dump(sorted(task_ids)),))
        return {row[0]: _run_from_row(row) for row in found}

    async def record_step(self, task_id: str, epoch: int, step: StepRecord) -> StepRecord:
        checked = check_step(task_id, epoch, step, self._limit)
        stored: StepRecord = await self._node_op("step_record", task_id, epoch, checked)
        return stored

    async def record_steps(
        self, task_id: str, epoch: int, steps: Sequence[StepRecord]
    ) -> list[StepRecord]:
        checked = [check_step(task_id, epoch, step, self._limit) for step in steps]
        if not checked:
            return []
        stored: list[StepRecord] = await self._node_op("steps_record", task_id, epoch, checked)
        return stored

    async def steps(self, task_id: str) -> list[StepRecord]:
        return [_step_from_row(row) for row in await self._read(_SELECT_STEPS, (task_id,))]

    async def put_fact(self, fact: Fact) -> bool:
        checked = check_fact(fact, self._limit)
        created: bool = await self._node_op("fact_put", checked)
        return created

    async def wake_for_fact(self, task_id: str, name: str) -> bool:
        woken: bool = await self._node_op("fact_wake", task_id, name)
        return woken

    async def link_child(self, parent_id: str, child_id: str) -> str | None:
        parent: str = await self._node_op("child_link", parent_id, child_id)
        return parent

    async def spawn_child(
        self,
        parent_id: str,
        epoch: int,
        step: StepRecord,
        child: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> SpawnedChild:
        if child.idempotency_key is None:
            raise ConfigurationError("spawn_child needs a child with an idempotency key")
        params = queue.enqueue_params(child, transitions, trace_carrier, self._limit)
        given = check_enqueue_facts(facts, child.task_id, self._limit)
        params += ([(fact.name, dump(fact.payload), fact.key) for fact in given],)
        checked = check_step(
            parent_id, epoch, dataclasses.replace(step, value=child.task_id), self._limit
        )
        created, stored, parent, recorded = await self._node_op(
            "child_spawn", parent_id, epoch, checked, params
        )
        return SpawnedChild(
            enqueued=Enqueued(snapshot=stored, created=created), parent=parent, step=recorded
        )

    async def parent_of(self, task_id: str) -> str | None:
        rows = list(await self._read("SELECT parent_id FROM tasks WHERE task_id = ?", (task_id,)))
        return None if not rows else rows[0][0]

    async def children_of(self, task_id: str) -> list[str]:
        rows = await self._read(
            "SELECT task_id FROM tasks WHERE parent_id = ? ORDER BY task_id", (task_id,)
        )
        return [row[0] for row in rows]

    async def get_fact(self, task_id: str, name: str) -> Fact | None:
        rows = list(await self._read(f"{_SELECT_FACTS} AND name = ?", (task_id, name)))
        return _fact_from_row(task_id, rows[0]) if rows else None

    async def facts(self, task_id: str) -> list[Fact]:
        rows = await self._read(f"{_SELECT_FACTS} ORDER BY name", (task_id,))
        return [_fact_from_row(task_id, row) for row in rows]

    async def begin_effect(self, task_id: str, epoch: int, op_key: str) -> EffectState:
        check_effect(task_id, epoch, op_key)
        state: EffectState = await self._node_op("effect_begin", task_id, epoch, op_key)
        return state

    async def finish_effect(
        self, task_id: str, epoch: int, op_key: str, result: Any, commit: Commit | None
    ) -> Any:
        check_effect(task_id, epoch, op_key)
        value = json_form(result, f"the result of operation {op_key!r}", self._limit)
        return await self._node_op("effect_finish", task_id, epoch, op_key, value, commit)
