"""Durable execution: epochs that fence attempts, steps memoised once, set-once facts.

Optional for a third-party store: mix :class:`DurableContract` into a
contract subclass only if the backend implements ``record_step``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from chongming.errors import FactConflict, PayloadError, TaskNotFound
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.durable import (
    FIRST_CALL,
    MAX_RESUMES,
    CommitFailed,
    DurableRun,
    Fact,
    StaleEpoch,
    StepRecord,
)
from chongming.testing.store_contract._support import (
    HOSTILE_STRINGS,
    ContractBase,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["DurableContract"]

_S = TaskStatus


def _step(name: str, value: object = None, *, occurrence: int = 0, ok: bool = True) -> StepRecord:
    return StepRecord(name=name, occurrence=occurrence, ok=ok, value=value)


class DurableContract(ContractBase):
    async def _running(self, store: TaskStore, task_id: str, owner: str = "node-a") -> TaskSnapshot:
        snapshot = make_snapshot(task_id)
        await store.create(snapshot)
        for to in (_S.QUEUED, _S.STARTING, _S.RUNNING):
            moved, transition = next_step(snapshot, to, owner=owner)
            await store.save(
                moved, expect_version=snapshot.status_version, transitions=[transition]
            )
            snapshot = moved
        return snapshot

    async def test_the_store_clock_is_aware_and_never_goes_back(self) -> None:
        async with self._store() as store:
            first = await store.store_time()
            second = await store.store_time()
            assert first.utcoffset() is not None
            assert second >= first

    async def test_each_attempt_raises_the_epoch_of_a_task_it_owns(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            assert await store.durable_runs(["d-1"]) == {}
            assert await store.begin_durable_attempt("d-1", "node-a", max_resumes=3) == 1
            assert await store.begin_durable_attempt("d-1", "node-a", max_resumes=5) == 2
            assert await store.durable_runs(["d-1", "ghost"]) == {
                "d-1": DurableRun(task_id="d-1", epoch=2, max_resumes=5)
            }

    async def test_an_attempt_cannot_start_on_a_task_it_does_not_hold(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1", owner="node-a")
            await store.create(make_snapshot("d-2"))
            for task_id, owner in (("d-1", "node-b"), ("d-2", "node-a"), ("ghost", "node-a")):
                await _raises(
                    StaleEpoch, store.begin_durable_attempt(task_id, owner, max_resumes=1)
                )
            assert await store.durable_runs(["d-1", "d-2", "ghost"]) == {}

    async def test_steps_are_recorded_once_in_order_in_their_json_form(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            first = await store.record_step("d-1", epoch, _step("fetch", (1, {2: "x"})))
            assert (first.value, first.seq, first.epoch) == ([1, {"2": "x"}], 1, epoch)
            await store.record_step("d-1", epoch, _step("fetch", HOSTILE_STRINGS[1], occurrence=1))
            error = {"type": "ValueError", "message": "bad row"}
            await store.record_step("d-1", epoch, _step("parse", error, ok=False))
            # The same name and occurrence again: the first record wins, nothing is added.
            again = await store.record_step("d-1", epoch, _step("fetch", "other"))
            assert again == first
            steps = await store.steps("d-1")
            assert [(s.name, s.occurrence, s.ok, s.seq) for s in steps] == [
                ("fetch", 0, True, 1),
                ("fetch", 1, True, 2),
                ("parse", 0, False, 3),
            ]
            assert steps[1].value == HOSTILE_STRINGS[1]
            assert steps[2].value == error
            assert await store.steps("ghost") == []

    async def test_a_stale_epoch_or_a_task_without_a_carrier_writes_nothing(self) -> None:
        async with self._store() as store:
            running = await self._running(store, "d-1")
            old = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            new = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            error = await _raises(StaleEpoch, store.record_step("d-1", old, _step("fetch", 1)))
            assert (error.task_id, error.epoch) == ("d-1", old)
            # The task left its carrier (a reconcile moved it): even the newest epoch is refused.
            moved, transition = next_step(running, _S.RETRY_WAIT)
            await store.save(moved, expect_version=running.status_version, transitions=[transition])
            await _raises(StaleEpoch, store.record_step("d-1", new, _step("fetch", 1)))
            await _raises(StaleEpoch, store.record_step("ghost", 1, _step("fetch", 1)))
            assert await store.steps("d-1") == []

    async def test_many_steps_are_recorded_as_one_by_one_in_their_order(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            first = await store.record_step("d-1", epoch, _step("fetch", 1))
            calls = [
                _step("fetch", "other"),
                _step("wait", None),
                _step("wait", (2,), occurrence=1),
            ]
            stored = await store.record_steps("d-1", epoch, calls)
            assert stored[0] == first  # recorded before: the first record wins
            assert [(s.name, s.occurrence, s.value, s.seq) for s in stored[1:]] == [
                ("wait", 0, None, 2),
                ("wait", 1, [2], 3),
            ]
            assert await store.steps("d-1") == [first, *stored[1:]]
            assert await store.record_steps("d-1", epoch, []) == []

    async def test_many_steps_of_a_stale_epoch_write_nothing(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            old = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            calls = [_step("a", 1), _step("b", 2)]
            await _raises(StaleEpoch, store.record_steps("d-1", old, calls))
            assert await store.steps("d-1") == []

    async def test_each_step_keeps_the_step_it_was_called_after(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            calls = [
                StepRecord(name="b", occurrence=0, ok=True, value=2, after=FIRST_CALL),
                StepRecord(name="a", occurrence=0, ok=True, value=1, after=FIRST_CALL),
                StepRecord(name="c", occurrence=3, ok=True, value=3, after=("a", 0)),
                StepRecord(name="old", occurrence=0, ok=True, value=4),  # before 0009: None
                StepRecord(name="d", occurrence=0, ok=True, value=5, after=["c", 3]),  # type: ignore[arg-type]
            ]
            answers = [await store.record_step("d-1", epoch, step) for step in calls]
            expected = [FIRST_CALL, FIRST_CALL, ("a", 0), None, ("c", 3)]
            assert [answer.after for answer in answers] == expected
            assert [step.after for step in await store.steps("d-1")] == expected
            for bad in (("", 1), ("a",), ("a", -1), ("a\x00", 0), ("a", True), "a", ("x" * 500, 0)):
                step = StepRecord(name="e", occurrence=0, ok=True, value=1, after=bad)  # type: ignore[arg-type]
                await _raises(PayloadError, store.record_step("d-1", epoch, step))
            assert len(await store.steps("d-1")) == len(calls)

    async def test_max_resumes_beyond_what_every_store_holds_is_refused(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            for bad in (MAX_RESUMES + 1, 2**63):
                await _raises(
                    PayloadError, store.begin_durable_attempt("d-1", "node-a", max_resumes=bad)
                )
            assert await store.durable_runs(["d-1"]) == {}
            assert await store.begin_durable_attempt("d-1", "node-a", max_resumes=MAX_RESUMES) == 1
            (run,) = (await store.durable_runs(["d-1"])).values()
            assert run.max_resumes == MAX_RESUMES

    async def test_racing_records_of_one_step_all_answer_the_stored_one(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            answers = await asyncio.gather(
                *(store.record_step("d-1", epoch, _step("fetch", n)) for n in range(6))
            )
            assert len({(a.value, a.seq) for a in answers}) == 1
            assert len(await store.steps("d-1")) == 1

    async def test_steps_recorded_at_once_by_one_attempt_each_get_their_own_place(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            answers = await asyncio.gather(
                *(store.record_step("d-1", epoch, _step(f"page-{n}", n)) for n in range(8))
            )
            assert sorted(a.seq for a in answers) == list(range(1, 9))
            stored = await store.steps("d-1")
            assert sorted(step.name for step in stored) == [f"page-{n}" for n in range(8)]

    async def test_bad_steps_are_refused_and_write_nothing(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            for bad in (
                _step(""),
                _step("a\x00b"),
                _step("x" * 10_000),
                _step("tab\there"),
                _step("fetch", occurrence=-1),
                _step("fetch", object()),
                _step("fetch", float("nan")),
                _step("fetch", 2**70),
            ):
                await _raises(PayloadError, store.record_step("d-1", epoch, bad))
            for bad_epoch in (0, -1, True):
                await _raises(PayloadError, store.record_step("d-1", bad_epoch, _step("fetch")))
            await _raises(PayloadError, store.begin_durable_attempt("d-1", "", max_resumes=1))
            await _raises(
                PayloadError, store.begin_durable_attempt("d-1", "node-a", max_resumes=-1)
            )
            assert await store.steps("d-1") == []

    # -- facts -----------------------------------------------------------------------

    async def test_a_fact_is_set_once_and_read_back_by_anyone(self) -> None:
        async with self._store() as store:
            await store.create(make_snapshot("d-1"))
            sent = Fact(task_id="d-1", name="downloaded", payload=(1, {2: "x"}), key="hook-7")
            assert await store.put_fact(sent) is True
            assert await store.put_fact(sent) is False  # the same value again: a no-op
            found = await store.get_fact("d-1", "downloaded")
            assert found == Fact(
                task_id="d-1", name="downloaded", payload=[1, {"2": "x"}], key="hook-7"
            )
            await _raises(
                FactConflict, store.put_fact(Fact(task_id="d-1", name="downloaded", payload=2))
            )
            await store.put_fact(Fact(task_id="d-1", name="approved", payload=HOSTILE_STRINGS[3]))
            assert [f.name for f in await store.facts("d-1")] == ["approved", "downloaded"]
            assert await store.get_fact("d-1", "missing") is None
            assert await store.facts("ghost") == []

    async def test_a_fact_value_is_compared_as_json_with_its_type(self) -> None:
        """``true`` is not ``1``, ``false`` is not ``0``; key order and 1 vs 1.0 do not matter."""
        async with self._store() as store:
            await store.create(make_snapshot("d-1"))
            sent = {"on": True, "off": False, "n": 1, "list": [True, 0]}
            for name, first, other in (
                ("flag", True, 1),
                ("zero", False, 0),
                ("one", 1, True),
                ("nested", sent, {**sent, "list": [1, False]}),
            ):
                assert await store.put_fact(Fact(task_id="d-1", name=name, payload=first))
                await _raises(
                    FactConflict, store.put_fact(Fact(task_id="d-1", name=name, payload=other))
                )
                found = await store.get_fact("d-1", name)
                assert found is not None
                assert found.payload == first
                assert type(found.payload) is type(first)
            reordered = {"list": [True, 0], "n": 1.0, "off": False, "on": True}
            assert (
                await store.put_fact(Fact(task_id="d-1", name="nested", payload=reordered)) is False
            )

    async def test_a_fact_for_an_unknown_task_or_with_bad_fields_writes_nothing(self) -> None:
        async with self._store() as store:
            await store.create(make_snapshot("d-1"))
            await _raises(
                TaskNotFound, store.put_fact(Fact(task_id="ghost", name="downloaded", payload=1))
            )
            for bad in (
                Fact(task_id="d-1", name="", payload=1),
                Fact(task_id="d-1", name="a\x00b", payload=1),
                Fact(task_id="d-1", name="x" * 10_000, payload=1),
                Fact(task_id="d-1", name="ok", payload=object()),
                Fact(task_id="d-1", name="ok", payload=1, key="bad\nkey"),
                Fact(task_id="", name="ok", payload=1),
            ):
                await _raises(PayloadError, store.put_fact(bad))
            assert await store.facts("d-1") == []

    async def test_racing_senders_of_one_fact_leave_exactly_one_value(self) -> None:
        async with self._store() as store:
            await store.create(make_snapshot("d-1"))

            async def send(n: int) -> bool | None:
                try:
                    return await store.put_fact(Fact(task_id="d-1", name="winner", payload=n))
                except FactConflict:
                    return None

            answers = await asyncio.gather(*(send(n) for n in range(6)))
            assert answers.count(True) == 1
            assert answers.count(None) == 5
            found = await store.get_fact("d-1", "winner")
            assert found is not None
            assert answers[found.payload] is True

    async def _waiting(
        self, store: TaskStore, task_id: str, fact: str, *, decided: bool = False
    ) -> TaskSnapshot:
        """A running durable task that recorded a deadline for ``fact`` (and its timeout)."""
        running = await self._running(store, task_id)
        epoch = await store.begin_durable_attempt(task_id, "node-a", max_resumes=3)
        await store.record_step(task_id, epoch, _step(f"fact:{fact}:deadline", None))
        if decided:
            await store.record_step(task_id, epoch, _step(f"fact:{fact}", {"timeout": True}))
        return running

    async def _park(self, store: TaskStore, snapshot: TaskSnapshot) -> TaskSnapshot:
        """``running -> retry_wait -> queued``, unowned, claimable only a day later."""
        wake = snapshot.updated_at + timedelta(days=1)
        for to in (_S.RETRY_WAIT, _S.QUEUED):
            moved, transition = next_step(snapshot, to, owner=None, not_before=wake)
            await store.save(
                moved, expect_version=snapshot.status_version, transitions=[transition]
            )
            snapshot = moved
        return snapshot

    async def test_sending_the_fact_a_parked_task_waits_for_makes_it_claimable_now(
        self,
    ) -> None:
        async with self._store() as store:
            parked = await self._park(store, await self._waiting(store, "d-1", "downloaded"))
            await self._park(store, await self._waiting(store, "d-2", "downloaded", decided=True))
            await self._park(store, await self._waiting(store, "d-3", "approved"))
            for task_id in ("d-1", "d-2", "d-3"):
                await store.put_fact(Fact(task_id=task_id, name="downloaded", payload=1))
            woken = await store.get("d-1")
            assert woken is not None
            assert woken.not_before is None
            assert (woken.status, woken.status_version) == (_S.QUEUED, parked.status_version)
            for task_id in ("d-2", "d-3"):  # decided already / waiting for another fact
                left = await store.get(task_id)
                assert left is not None
                assert left.not_before is not None

    async def test_wake_for_fact_wakes_only_a_parked_waiter_whose_fact_is_there(self) -> None:
        async with self._store() as store:
            await self._park(store, await self._waiting(store, "d-1", "downloaded"))
            assert await store.wake_for_fact("d-1", "downloaded") is False  # not sent yet
            assert await store.wake_for_fact("ghost", "downloaded") is False
            # The fact comes while its task is still running: nothing to wake yet.
            running = await self._waiting(store, "d-2", "downloaded")
            await store.put_fact(Fact(task_id="d-2", name="downloaded", payload=1))
            assert await store.wake_for_fact("d-2", "downloaded") is False  # not parked
            assert await store.get("d-2") == running
            await self._park(store, running)
            assert await store.wake_for_fact("d-2", "downloaded") is False  # awake already
            still = await store.get("d-1")
            assert still is not None
            assert still.not_before is not None

    async def test_a_park_written_after_its_fact_came_is_claimable_at_once(self) -> None:
        """The park itself wakes a task whose fact is there: no second call has to.

        The fact can come between the task's last look and its park being
        durable; were a later ``wake_for_fact`` the only wake, a node killed
        between the two would leave the task asleep until its deadline.
        """
        async with self._store() as store:
            running = await self._waiting(store, "d-1", "downloaded")
            await store.put_fact(Fact(task_id="d-1", name="downloaded", payload=1))
            parked = await self._park(store, running)
            woken = await store.get("d-1")
            assert woken is not None
            assert woken.not_before is None
            assert (woken.status, woken.status_version) == (_S.QUEUED, parked.status_version)
            # Not woken: a decided wait, a wait for another fact, a plain sleep.
            decided = await self._waiting(store, "d-2", "downloaded", decided=True)
            await store.put_fact(Fact(task_id="d-2", name="downloaded", payload=1))
            other = await self._waiting(store, "d-3", "approved")
            await store.put_fact(Fact(task_id="d-3", name="downloaded", payload=1))
            sleeping = await self._running(store, "d-4")
            await store.put_fact(Fact(task_id="d-4", name="downloaded", payload=1))
            for snapshot in (decided, other, sleeping):
                await self._park(store, snapshot)
                left = await store.get(snapshot.task_id)
                assert left is not None
                assert left.not_before is not None, snapshot.task_id

    # -- the operation ledger --------------------------------------------------------

    async def test_an_operation_runs_its_commit_once_and_answers_its_result_after(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            commits: list[object] = []

            def commit(connection: object, result: object) -> None:
                commits.append(result)

            first = await store.begin_effect("d-1", epoch, "charge:7")
            assert (first.done, first.resumed) == (False, False)
            done = await store.finish_effect("d-1", epoch, "charge:7", (1, "ok"), commit)
            assert done == [1, "ok"]
            assert commits == [[1, "ok"]]
            again = await store.begin_effect("d-1", epoch, "charge:7")
            assert (again.done, again.result) == (True, [1, "ok"])
            # Finishing it again answers the stored result and commits nothing.
            assert await store.finish_effect("d-1", epoch, "charge:7", "other", commit) == [1, "ok"]
            assert commits == [[1, "ok"]]

    async def test_an_operation_begun_and_left_is_resumed_by_the_next_attempt(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            old = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            assert not (await store.begin_effect("d-1", old, "upload")).resumed
            new = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            state = await store.begin_effect("d-1", new, "upload")
            assert (state.done, state.resumed) == (False, True)

    async def test_a_stale_epoch_commits_nothing_and_a_failed_commit_writes_nothing(self) -> None:
        async with self._store() as store:
            await self._running(store, "d-1")
            old = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            await store.begin_effect("d-1", old, "charge")
            new = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            commits: list[object] = []
            await _raises(
                StaleEpoch,
                store.finish_effect("d-1", old, "charge", 1, lambda c, r: commits.append(r)),
            )
            await _raises(StaleEpoch, store.begin_effect("d-1", old, "refund"))
            assert commits == []

            def broken(connection: object, result: object) -> None:
                raise ValueError("the business table said no")

            failed = await _raises(
                CommitFailed, store.finish_effect("d-1", new, "charge", 1, broken)
            )
            assert isinstance(failed.__cause__, ValueError)
            state = await store.begin_effect("d-1", new, "charge")
            assert not state.done  # nothing of the failed finish was written
            for bad in ("", "a\x00b", "k" * 10_000):
                await _raises(PayloadError, store.begin_effect("d-1", new, bad))
            await _raises(PayloadError, store.finish_effect("d-1", new, "charge", object(), None))
