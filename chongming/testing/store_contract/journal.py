"""Journal details: step and fact times (where kept), the effects ledger, nothing of others.

Optional for a third-party store: mix :class:`JournalContract` into a
contract subclass only if the backend implements ``journal_details``. It
needs durable execution. A store that keeps no times (the in-memory one)
passes with empty ``step_times`` and ``fact_times``.
"""

from __future__ import annotations

from chongming.state.status import TaskStatus
from chongming.stores.durable import Fact, StepRecord
from chongming.testing.store_contract._support import ContractBase, make_snapshot

__all__ = ["JournalContract"]


class JournalContract(ContractBase):
    async def test_details_give_times_and_the_effects_ledger_of_one_task(self) -> None:
        async with self._store() as store:
            for task_id in ("d-1", "d-2"):
                running = make_snapshot(
                    task_id, status=TaskStatus.RUNNING, status_version=1, owner="node-a"
                )
                await store.create(running)
            epoch = await store.begin_durable_attempt("d-1", "node-a", max_resumes=3)
            for name in ("fetch", "parse"):
                step = StepRecord(name=name, occurrence=0, ok=True, value=name)
                await store.record_step("d-1", epoch, step)
            await store.put_fact(Fact(task_id="d-1", name="approved", payload=True, key="ops"))
            await store.begin_effect("d-1", epoch, "charge")
            await store.finish_effect("d-1", epoch, "charge", {"paid": 5}, None)
            await store.begin_effect("d-1", epoch, "mail")  # begun, never finished
            other = await store.begin_durable_attempt("d-2", "node-a", max_resumes=3)
            await store.begin_effect("d-2", other, "theirs")

            details = await store.journal_details("d-1")
            assert [(e.op_key, e.committed) for e in details.effects] == [
                ("charge", True),
                ("mail", False),
            ]
            assert details.effects[0].result == {"paid": 5}
            assert details.effects[1].result is None
            for effect in details.effects:
                assert effect.epoch in (None, epoch)
            charge = details.effects[0]
            if charge.started_at is not None and charge.done_at is not None:
                assert charge.started_at <= charge.done_at
            if details.step_times:  # a store that keeps times keeps them for every step
                assert set(details.step_times) == {("fetch", 0), ("parse", 0)}
                assert details.step_times["fetch", 0] <= details.step_times["parse", 0]
            if details.fact_times:
                assert set(details.fact_times) == {"approved"}
            nothing = await store.journal_details("no-such-task")
            assert nothing.effects == []
            assert dict(nothing.step_times) == {}
