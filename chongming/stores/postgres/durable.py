"""Durable execution on PostgreSQL: epochs and memoised steps, each one short transaction.

A step is recorded with the run row locked ``FOR UPDATE`` and the task row
``FOR SHARE``: an attempt's start (which raises the epoch), a reconcile
(which moves the task) and another record of the same task wait for it to
commit, and it waits for them, so under READ COMMITTED the fencing check,
the "already recorded?" look and the insert still see one state. Both statements are
safe to run again after a connection error of unknown outcome: a second
start only raises the epoch once more, and a step already recorded is
answered as stored.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from chongming.errors import FactConflict, StoreError, TaskNotFound
from chongming.state.payload import json_form
from chongming.state.status import CARRIER_STATUSES, TERMINAL_STATUSES
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
from chongming.stores.postgres.commands import channel_for
from chongming.stores.postgres.schema import quote_schema

_ENDED = ", ".join(f"'{status.value}'" for status in sorted(TERMINAL_STATUSES))

__all__ = ["DurableMethods", "DurableOnPostgres"]

Runner = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]

_CARRIERS = [status.value for status in CARRIER_STATUSES]
_COLUMNS = "name, occurrence, ok, value::text AS value, seq, epoch, after_name, after_occurrence"


def _step(row: Any) -> StepRecord:
    return StepRecord(
        name=row["name"],
        occurrence=row["occurrence"],
        ok=row["ok"],
        value=json.loads(row["value"]),
        seq=row["seq"],
        epoch=row["epoch"],
        after=None if row["after_name"] is None else (row["after_name"], row["after_occurrence"]),
    )


#: Records of one attempt racing for the next seq (steps gathered at once) retry.
_SEQ_RACES = 8


def _check_fence(task_id: str, epoch: int, holding: int | None, status: str | None) -> None:
    """Raise :class:`StaleEpoch` unless ``epoch`` holds the task and it holds a carrier."""
    if holding is None:
        raise StaleEpoch(task_id, epoch, "the task has no durable run")
    if holding != epoch:
        raise StaleEpoch(task_id, epoch, f"epoch {holding} holds it now")
    if status not in _CARRIERS:
        raise StaleEpoch(task_id, epoch, f"the task is {status} (no attempt holds it)")


class DurableOnPostgres:
    """The statements and transactions; the store supplies the connection runner."""

    def __init__(
        self, schema: str, *, run: Runner, limit: int | None, queue_channel: str = ""
    ) -> None:
        self._run = run
        self._schema = schema
        self._queue_channel = queue_channel
        self._limit = limit
        self._task = f"SELECT status, owner FROM {schema}.tasks WHERE task_id = $1 FOR SHARE"
        self._bump = (
            f"INSERT INTO {schema}.durable_runs (task_id, epoch, max_resumes) VALUES ($1, 1, $2)"
            " ON CONFLICT (task_id) DO UPDATE SET epoch = durable_runs.epoch + 1,"
            " max_resumes = EXCLUDED.max_resumes, updated_at = clock_timestamp()"
            " RETURNING epoch"
        )
        self._runs = (
            f"SELECT task_id, epoch, max_resumes FROM {schema}.durable_runs"
            " WHERE task_id = ANY($1::text[])"
        )
        self._fence_sql = (
            f"SELECT r.epoch, t.status FROM {schema}.durable_runs r"
            f" JOIN {schema}.tasks t ON t.task_id = r.task_id WHERE r.task_id = $1"
            " FOR UPDATE OF r FOR SHARE OF t"
        )
        self._find = (
            f"SELECT {_COLUMNS} FROM {schema}.durable_steps"
            " WHERE task_id = $1 AND name = $2 AND occurrence = $3"
        )
        # One statement, one round trip: the fence (the run row locked, the task
        # row shared), then the insert only where it holds. A conflict (the step
        # recorded already, or a racing record of this attempt took the next seq)
        # inserts nothing; the caller then reads the step or tries again.
        self._record = (
            f"WITH fence AS (SELECT r.epoch, t.status FROM {schema}.durable_runs r"
            f" JOIN {schema}.tasks t ON t.task_id = r.task_id WHERE r.task_id = $1"
            " FOR UPDATE OF r FOR SHARE OF t),"
            " inserted AS ("
            f"INSERT INTO {schema}.durable_steps (task_id, name, occurrence, seq, ok, value, epoch,"
            " after_name, after_occurrence)"
            " SELECT $1, $2, $3, coalesce(max(seq), 0) + 1, $4, $5::jsonb, $6,"
            " $8::text, $9::integer"
            f" FROM {schema}.durable_steps WHERE task_id = $1"
            " HAVING EXISTS (SELECT 1 FROM fence WHERE epoch = $6 AND status = ANY($7::text[]))"
            " ON CONFLICT DO NOTHING RETURNING seq)"
            " SELECT (SELECT epoch FROM fence) AS epoch, (SELECT status FROM fence) AS status,"
            " (SELECT seq FROM inserted) AS seq"
        )
        self._steps = (
            f"SELECT {_COLUMNS} FROM {schema}.durable_steps WHERE task_id = $1 ORDER BY seq"
        )
        self._has_task = f"SELECT 1 FROM {schema}.tasks WHERE task_id = $1"
        # The task row's lock orders a fact against a park of its task: either the
        # park waits for the fact's commit (and its node's wake sees the fact), or
        # the fact's wake, a later statement, sees the task parked.
        self._lock_task = f"SELECT 1 FROM {schema}.tasks WHERE task_id = $1 FOR UPDATE"
        self._wake = (
            f"WITH woken AS (UPDATE {schema}.tasks SET not_before = NULL"
            " WHERE task_id = $1 AND status = 'queued' AND owner IS NULL"
            " AND not_before IS NOT NULL"
            f" AND EXISTS (SELECT 1 FROM {schema}.durable_facts WHERE task_id = $1 AND name = $2)"
            f" AND (SELECT count(*) FROM {schema}.durable_steps WHERE task_id = $1 AND name = $3)"
            f" > (SELECT count(*) FROM {schema}.durable_steps WHERE task_id = $1 AND name = $4)"
            " RETURNING task_id)"
            " SELECT count(*) FROM (SELECT pg_notify($5, '') FROM woken) AS notified"
        )
        self._effect = (
            f"SELECT state, result::text AS result FROM {schema}.durable_effects"
            " WHERE task_id = $1 AND op_key = $2"
        )
        self._intend = (
            f"INSERT INTO {schema}.durable_effects (task_id, op_key, state, epoch)"
            " VALUES ($1, $2, 'started', $3) ON CONFLICT (task_id, op_key)"
            " DO UPDATE SET epoch = EXCLUDED.epoch, started_at = clock_timestamp()"
        )
        self._done = (
            f"INSERT INTO {schema}.durable_effects (task_id, op_key, state, result, epoch,"
            " done_at) VALUES ($1, $2, 'done', $3::jsonb, $4, clock_timestamp())"
            " ON CONFLICT (task_id, op_key) DO UPDATE SET state = 'done',"
            " result = EXCLUDED.result, epoch = EXCLUDED.epoch, done_at = EXCLUDED.done_at"
        )
        self._put_fact = (
            f"INSERT INTO {schema}.durable_facts (task_id, name, payload, key)"
            " VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT (task_id, name) DO NOTHING RETURNING 1"
        )
        self._facts = (
            f"SELECT name, payload::text AS payload, key FROM {schema}.durable_facts"
            " WHERE task_id = $1 AND ($2::text IS NULL OR name = $2) ORDER BY name"
        )

    async def begin(self, task_id: str, owner: str, max_resumes: int) -> int:
        check_begin(task_id, owner, max_resumes)

        async def begin(conn: Any) -> int:
            async with conn.transaction():
                row = await conn.fetchrow(self._task, task_id)
                if (
                    row is None
                    or row["status"] not in ("starting", "running")
                    or (row["owner"] != owner)
                ):
                    found = (
                        "no such task"
                        if row is None
                        else f"it is {row['status']}, owned by {row['owner']!r}"
                    )
                    raise StaleEpoch(task_id, 0, f"an attempt of {owner!r} cannot start ({found})")
                epoch: int = await conn.fetchval(self._bump, task_id, max_resumes)
                return epoch

        epoch: int = await self._run(f"starting a durable attempt of {task_id!r}", begin)
        return epoch

    async def runs(self, task_ids: Collection[str]) -> dict[str, DurableRun]:
        if not task_ids:
            return {}
        ids = sorted(task_ids)
        rows = await self._run("reading durable runs", lambda c: c.fetch(self._runs, ids))
        return {
            row["task_id"]: DurableRun(
                task_id=row["task_id"], epoch=row["epoch"], max_resumes=row["max_resumes"]
            )
            for row in rows
        }

    async def _fence(self, conn: Any, task_id: str, epoch: int) -> None:
        """Inside the caller's transaction: the epoch holds, the run row locked for it."""
        row = await conn.fetchrow(self._fence_sql, task_id)
        if row is None:
            _check_fence(task_id, epoch, None, None)
        else:
            _check_fence(task_id, epoch, row["epoch"], row["status"])

    async def begin_effect(self, task_id: str, epoch: int, op_key: str) -> EffectState:
        check_effect(task_id, epoch, op_key)

        async def begin(conn: Any) -> EffectState:
            async with conn.transaction():
                await self._fence(conn, task_id, epoch)
                found = await conn.fetchrow(self._effect, task_id, op_key)
                if found is not None and found["state"] == "done":
                    return EffectState(done=True, resumed=False, result=json.loads(found["result"]))
                await conn.execute(self._intend, task_id, op_key, epoch)
                return EffectState(done=False, resumed=found is not None)

        state: EffectState = await self._run(f"beginning operation {op_key!r}", begin)
        return state

    async def finish_effect(
        self, task_id: str, epoch: int, op_key: str, result: Any, commit: Commit | None
    ) -> Any:
        check_effect(task_id, epoch, op_key)
        value = json_form(result, f"the result of operation {op_key!r}", self._limit)
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))

        async def finish(conn: Any) -> Any:
            # Safe to run again after an unknown outcome: a committed one is found done.
            async with conn.transaction():
                await self._fence(conn, task_id, epoch)
                found = await conn.fetchrow(self._effect, task_id, op_key)
                if found is not None and found["state"] == "done":
                    return json.loads(found["result"])
                if commit is not None:
                    try:
                        outcome = commit(conn, value)
                        if inspect.isawaitable(outcome):
                            await outcome
                    except Exception as error:
                        raise CommitFailed(op_key, error) from error
                await conn.execute(self._done, task_id, op_key, text, epoch)
                return value

        return await self._run(f"finishing operation {op_key!r}", finish)

    async def record(self, task_id: str, epoch: int, step: StepRecord) -> StepRecord:
        checked = check_step(task_id, epoch, step, self._limit)

        async def record(conn: Any) -> StepRecord:
            return await self._record_one(conn, task_id, epoch, checked)

        stored: StepRecord = await self._run(f"recording a step of {task_id!r}", record)
        return stored

    async def record_all(
        self, task_id: str, epoch: int, steps: Sequence[StepRecord]
    ) -> list[StepRecord]:
        """Every one of ``steps`` in one transaction, or none (each statement fenced)."""
        checked = [check_step(task_id, epoch, step, self._limit) for step in steps]
        if not checked:
            return []

        async def record(conn: Any) -> list[StepRecord]:
            async with conn.transaction():
                return [await self._record_one(conn, task_id, epoch, step) for step in checked]

        stored: list[StepRecord] = await self._run(f"recording steps of {task_id!r}", record)
        return stored

    async def _record_one(
        self, conn: Any, task_id: str, epoch: int, checked: StepRecord
    ) -> StepRecord:
        value = json.dumps(checked.value, ensure_ascii=False, separators=(",", ":"))
        after_name, after_occurrence = (None, None) if checked.after is None else checked.after
        args = (
            task_id,
            checked.name,
            checked.occurrence,
            checked.ok,
            value,
            epoch,
            _CARRIERS,
            after_name,
            after_occurrence,
        )
        for _ in range(_SEQ_RACES):
            row = await conn.fetchrow(self._record, *args)
            _check_fence(task_id, epoch, row["epoch"], row["status"])
            if row["seq"] is not None:
                return dataclasses.replace(checked, seq=row["seq"], epoch=epoch)
            found = await conn.fetchrow(self._find, task_id, checked.name, checked.occurrence)
            if found is not None:
                return _step(found)  # recorded already: the first record wins
        raise StoreError(f"recording step {checked.name!r} of {task_id!r} kept racing")

    async def steps(self, task_id: str) -> list[StepRecord]:
        rows = await self._run("reading steps", lambda c: c.fetch(self._steps, task_id))
        return [_step(row) for row in rows]

    async def put_fact(self, fact: Fact) -> bool:
        checked = check_fact(fact, self._limit)
        payload = json.dumps(checked.payload, ensure_ascii=False, separators=(",", ":"))

        async def put(conn: Any) -> bool:
            # Safe to run again after an unknown outcome: the same value answers False.
            async with conn.transaction():
                if await conn.fetchval(self._lock_task, checked.task_id) is None:
                    raise TaskNotFound(checked.task_id)
                args = (checked.task_id, checked.name, payload, checked.key)
                if await conn.fetchval(self._put_fact, *args) is not None:
                    await conn.fetchval(self._wake, *self._wake_args(checked.task_id, checked.name))
                    return True
                (row,) = await conn.fetch(self._facts, checked.task_id, checked.name)
                if not same_fact_value(json.loads(row["payload"]), checked.payload):
                    raise FactConflict(checked.task_id, checked.name)
                return False

        created: bool = await self._run(f"sending fact {fact.name!r}", put)
        return created

    def _wake_args(self, task_id: str, name: str) -> tuple[str, ...]:
        return (task_id, name, f"fact:{name}:deadline", f"fact:{name}", self._queue_channel)

    async def wake_for_fact(self, task_id: str, name: str) -> bool:
        args = self._wake_args(task_id, name)
        woken = await self._run(
            f"waking {task_id!r} for fact {name!r}", lambda c: c.fetchval(self._wake, *args)
        )
        return bool(woken)

    async def link_child(self, parent_id: str, child_id: str) -> str:
        schema = self._schema

        async def link(conn: Any) -> str:
            # Safe to run again: the parent is set once, and the fact is set once.
            async with conn.transaction():
                # Not locked: the child's end locks child then parent (its trigger).
                found = f"SELECT 1 FROM {schema}.tasks WHERE task_id = $1"
                if await conn.fetchval(found, parent_id) is None:
                    raise TaskNotFound(parent_id)
                linked = await conn.fetchrow(
                    f"UPDATE {schema}.tasks SET parent_id = coalesce(parent_id, $2)"
                    f" WHERE task_id = $1 RETURNING parent_id, status IN ({_ENDED})",
                    child_id,
                    parent_id,
                )
                if linked is None:
                    raise TaskNotFound(child_id)
                if linked[1]:  # ended before the link: its trigger saw no parent; fire it now
                    await conn.execute(
                        f"UPDATE {schema}.tasks SET status = status WHERE task_id = $1", child_id
                    )
                parent: str = linked[0]
                return parent

        linked: str = await self._run(f"linking child {child_id!r} to {parent_id!r}", link)
        return linked

    async def parent_of(self, task_id: str) -> str | None:
        sql = f"SELECT parent_id FROM {self._schema}.tasks WHERE task_id = $1"
        found: str | None = await self._run("reading a parent", lambda c: c.fetchval(sql, task_id))
        return found

    async def children_of(self, task_id: str) -> list[str]:
        sql = f"SELECT task_id FROM {self._schema}.tasks WHERE parent_id = $1 ORDER BY task_id"
        rows = await self._run("reading children", lambda c: c.fetch(sql, task_id))
        return [row["task_id"] for row in rows]

    async def facts(self, task_id: str, name: str | None = None) -> list[Fact]:
        rows = await self._run("reading facts", lambda c: c.fetch(self._facts, task_id, name))
        return [
            Fact(task_id=task_id, name=r["name"], payload=json.loads(r["payload"]), key=r["key"])
            for r in rows
        ]


class DurableMethods:
    """The store port's durable methods, delegated to a lazily made :class:`DurableOnPostgres`."""

    _schema: str
    _limit: int | None
    _durable_impl: DurableOnPostgres | None = None

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    @property
    def _durable(self) -> DurableOnPostgres:
        if self._durable_impl is None:
            self._durable_impl = DurableOnPostgres(
                quote_schema(self._schema),
                run=self._read,
                limit=self._limit,
                queue_channel=channel_for(self._schema + "/queue"),
            )
        return self._durable_impl

    async def store_time(self) -> datetime:
        found: datetime = await self._read(
            "reading the store clock", lambda conn: conn.fetchval("SELECT clock_timestamp()")
        )
        return found

    async def begin_durable_attempt(self, task_id: str, owner: str, *, max_resumes: int) -> int:
        return await self._durable.begin(task_id, owner, max_resumes)

    async def durable_runs(self, task_ids: Collection[str]) -> dict[str, DurableRun]:
        return await self._durable.runs(task_ids)

    async def record_step(self, task_id: str, epoch: int, step: StepRecord) -> StepRecord:
        return await self._durable.record(task_id, epoch, step)

    async def record_steps(
        self, task_id: str, epoch: int, steps: Sequence[StepRecord]
    ) -> list[StepRecord]:
        return await self._durable.record_all(task_id, epoch, steps)

    async def steps(self, task_id: str) -> list[StepRecord]:
        return await self._durable.steps(task_id)

    async def put_fact(self, fact: Fact) -> bool:
        return await self._durable.put_fact(fact)

    async def wake_for_fact(self, task_id: str, name: str) -> bool:
        return await self._durable.wake_for_fact(task_id, name)

    async def link_child(self, parent_id: str, child_id: str) -> str | None:
        return await self._durable.link_child(parent_id, child_id)

    async def parent_of(self, task_id: str) -> str | None:
        return await self._durable.parent_of(task_id)

    async def children_of(self, task_id: str) -> list[str]:
        return await self._durable.children_of(task_id)

    async def get_fact(self, task_id: str, name: str) -> Fact | None:
        found = await self._durable.facts(task_id, name)
        return found[0] if found else None

    async def facts(self, task_id: str) -> list[Fact]:
        return await self._durable.facts(task_id)

    async def begin_effect(self, task_id: str, epoch: int, op_key: str) -> EffectState:
        return await self._durable.begin_effect(task_id, epoch, op_key)

    async def finish_effect(
        self, task_id: str, epoch: int, op_key: str, result: Any, commit: Commit | None
    ) -> Any:
        return await self._durable.finish_effect(task_id, epoch, op_key, result, commit)
