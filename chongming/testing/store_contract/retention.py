"""Retention: terminal tasks past the cut go with every row of theirs; nothing else does.

Optional for a third-party store: mix :class:`RetentionContract` into a
contract subclass only if the backend implements ``prune_tasks``. It needs
the work queue, durable execution and trace carriers too (it checks that a
prune takes their rows with the task).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from chongming.errors import InvalidRetention
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot
from chongming.state.status import TERMINAL_STATUSES, TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.durable import Fact, StepRecord
from chongming.stores.retention import PruneSelection
from chongming.testing.store_contract._support import (
    T0,
    ContractBase,
    _command,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["RetentionContract"]

_S = TaskStatus
#: Every task of the tests finishes within seconds of T0; the cut is an hour later.
_CUT = T0 + timedelta(hours=1)
_CARRIER = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


def _everything(before: object = _CUT, **fields: object) -> PruneSelection:
    return PruneSelection(finished_before=before, **fields)  # type: ignore[arg-type]


async def _all(store: TaskStore) -> list[TaskSnapshot]:
    return await store.query(TaskQuery())


def _noop_commit(connection: object, result: object) -> None:
    """The business write of an effect (none here)."""


class RetentionContract(ContractBase):
    async def _walk(
        self, store: TaskStore, snapshot: TaskSnapshot, *path: TaskStatus
    ) -> TaskSnapshot:
        for to in path:
            moved, transition = next_step(snapshot, to, owner=snapshot.owner or "node-a")
            await store.save(
                moved, expect_version=snapshot.status_version, transitions=[transition]
            )
            snapshot = moved
        return snapshot

    async def _finished(
        self, store: TaskStore, task_id: str, status: TaskStatus = _S.SUCCEEDED, **fields: object
    ) -> TaskSnapshot:
        """A task created with ``fields`` that ran to ``status`` (through running)."""
        snapshot = make_snapshot(task_id, **fields)
        await store.create(snapshot)
        path = [_S.QUEUED, _S.STARTING, _S.RUNNING, status]
        if status is _S.CANCELLED:
            path = [status]
        if status is _S.SKIPPED:
            path = [_S.BLOCKED, _S.SKIPPED]
        if status is _S.STOPPED:
            path = [_S.QUEUED, _S.STARTING, _S.RUNNING, _S.STOPPING, _S.STOPPED]
        return await self._walk(store, snapshot, *path)

    async def _fully_loaded(self, store: TaskStore, task_id: str, key: str) -> TaskSnapshot:
        """A durable task enqueued with a key and a carrier, with a command, step, fact
        and effect, that then succeeded: a row in every table a task owns."""
        pending = make_snapshot(task_id, idempotency_key=key, args=(1,))
        queued, transition = next_step(pending, _S.QUEUED, trigger="orchestrator:enqueued")
        queued = dataclasses.replace(queued, queued_at=queued.updated_at)
        assert (await store.enqueue(queued, [transition], trace_carrier=_CARRIER)).created
        running = await self._walk(store, queued, _S.STARTING, _S.RUNNING)
        epoch = await store.begin_durable_attempt(task_id, "node-a", max_resumes=3)
        await store.record_step(
            task_id, epoch, StepRecord(name="fetch", occurrence=0, ok=True, value=7)
        )
        await store.put_fact(Fact(task_id=task_id, name="approved", payload=True))
        await store.begin_effect(task_id, epoch, "charge")
        await store.finish_effect(task_id, epoch, "charge", "paid", _noop_commit)
        await store.submit_command(_command(f"cmd-{task_id}", task_id))
        return await self._walk(store, running, _S.SUCCEEDED)

    async def test_a_terminal_task_past_the_cut_goes_with_every_row_of_its_own(self) -> None:
        async with self._store() as store:
            await self._fully_loaded(store, "old", key="order-1")
            await self._fully_loaded(store, "kept", key="order-2")
            assert await store.prune_tasks(_everything(task_ids=frozenset({"old"})), limit=10) == 1
            assert await store.get("old") is None
            assert await store.history("old") == []
            assert await store.steps("old") == []
            assert await store.facts("old") == []
            assert await store.durable_runs(["old"]) == {}
            assert await store.trace_carriers(["old"]) == {}
            assert await store.command_records(task_id="old") == []
            # Its key is free again, and a new task of the same id starts from nothing.
            again = await self._fully_loaded(store, "old", key="order-1")
            assert again.status is _S.SUCCEEDED
            assert [step.value for step in await store.steps("old")] == [7]
            # The other task kept every row.
            assert (await store.get("kept")) is not None
            assert len(await store.history("kept")) == 4
            assert [step.name for step in await store.steps("kept")] == ["fetch"]
            assert [fact.name for fact in await store.facts("kept")] == ["approved"]
            assert set(await store.durable_runs(["kept"])) == {"kept"}
            assert await store.trace_carriers(["kept"]) == {"kept": _CARRIER}
            assert len(await store.command_records(task_id="kept")) == 1

    async def test_an_effect_of_a_pruned_task_does_not_answer_for_a_new_one(self) -> None:
        async with self._store() as store:
            await self._fully_loaded(store, "t-1", key="k")
            assert await store.prune_tasks(_everything(), limit=10) == 1
            await store.create(make_snapshot("t-1"))
            snapshot = await self._walk(
                store, make_snapshot("t-1"), _S.QUEUED, _S.STARTING, _S.RUNNING
            )
            assert snapshot.status is _S.RUNNING
            epoch = await store.begin_durable_attempt("t-1", "node-a", max_resumes=3)
            assert epoch == 1, "the durable run went with the old task"
            state = await store.begin_effect("t-1", epoch, "charge")
            assert (state.done, state.resumed) == (False, False)

    async def test_only_terminal_tasks_finished_before_the_cut_are_pruned(self) -> None:
        async with self._store() as store:
            for status in sorted(TERMINAL_STATUSES):
                await self._finished(store, f"old-{status}", status)
            young = T0 + timedelta(hours=2)
            await self._finished(store, "young", created_at=young, updated_at=young)
            await store.create(make_snapshot("running"))
            running = await self._walk(
                store, make_snapshot("running"), _S.QUEUED, _S.STARTING, _S.RUNNING
            )
            await store.create(make_snapshot("pending"))
            # A row that says finished long ago but is not terminal is kept all the same.
            odd = make_snapshot("odd", status=_S.QUEUED, status_version=0, finished_at=T0)
            await store.create(odd)
            assert await store.count_prunable(_everything()) == len(TERMINAL_STATUSES)
            assert await store.prune_tasks(_everything(), limit=100) == len(TERMINAL_STATUSES)
            assert await store.prune_tasks(_everything(), limit=100) == 0
            left = {s.task_id for s in await _all(store)}
            assert left == {"young", running.task_id, "pending", "odd"}

    async def test_a_dry_run_counts_and_deletes_nothing(self) -> None:
        async with self._store() as store:
            for n in range(5):
                await self._finished(store, f"t-{n}")
            assert await store.count_prunable(_everything()) == 5
            assert await store.count_prunable(_everything(before=T0)) == 0
            assert len(await _all(store)) == 5
            assert all([await store.history(f"t-{n}") for n in range(5)])

    async def test_batches_take_the_oldest_first_and_never_more_than_the_limit(self) -> None:
        async with self._store() as store:
            for n in range(7):
                at = T0 + timedelta(minutes=n)
                await self._finished(store, f"t-{n}", created_at=at, updated_at=at)
            assert await store.prune_tasks(_everything(), limit=3) == 3
            assert {s.task_id for s in await _all(store)} == {f"t-{n}" for n in range(3, 7)}
            assert await store.prune_tasks(_everything(), limit=3) == 3
            assert await store.prune_tasks(_everything(), limit=3) == 1
            assert await _all(store) == []

    async def test_statuses_names_and_exclusions_narrow_a_prune(self) -> None:
        async with self._store() as store:
            await self._finished(store, "ok-a", _S.SUCCEEDED, name="extract")
            await self._finished(store, "bad-a", _S.FAILED, name="extract")
            await self._finished(store, "ok-b", _S.SUCCEEDED, name="report")
            await self._finished(store, "lost-b", _S.LOST, name="report")
            only_failed = _everything(statuses=frozenset({_S.FAILED, _S.LOST}))
            assert await store.count_prunable(only_failed) == 2
            assert await store.count_prunable(_everything(names=frozenset({"report"}))) == 2
            not_report = _everything(exclude_names=frozenset({"report"}))
            assert await store.prune_tasks(not_report, limit=10) == 2
            assert {s.task_id for s in await _all(store)} == {"ok-b", "lost-b"}
            assert await store.prune_tasks(only_failed, limit=10) == 1
            assert {s.task_id for s in await _all(store)} == {"ok-b"}

    async def test_a_non_terminal_status_or_a_bad_limit_is_refused_and_nothing_deleted(
        self,
    ) -> None:
        async with self._store() as store:
            await self._finished(store, "t-1")
            running = _everything(statuses=frozenset({_S.RUNNING, _S.SUCCEEDED}))
            error = await _raises(InvalidRetention, store.prune_tasks(running, limit=10))
            assert error.field == "status"
            await _raises(InvalidRetention, store.count_prunable(running))
            for limit in (0, -1):
                error = await _raises(
                    InvalidRetention, store.prune_tasks(_everything(), limit=limit)
                )
                assert error.field == "limit"
            naive = _everything(before=_CUT.replace(tzinfo=None))
            error = await _raises(InvalidRetention, store.prune_tasks(naive, limit=10))
            assert error.field == "finished_before"
            assert [s.task_id for s in await _all(store)] == ["t-1"]
