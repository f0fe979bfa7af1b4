"""``ctx.gather`` decides the children that already ended in one write, as one by one would.

A fact wait per child records two steps, its deadline then its decision. A
gather of children that ended before it looked writes the same pairs, in the
same order with the same predecessors, in one ``record_steps`` call; a replay
reads them back and writes nothing. On the in-memory store, by hand: the
journal the worker would make, without a worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chongming.plane.durable import Journal
from chongming.state.status import TaskStatus
from chongming.stores.durable import StepRecord
from chongming.stores.memory import InMemoryTaskStore
from chongming.task_api.journal import ChildHandle
from chongming.testing.store_contract import make_snapshot, next_step

S = TaskStatus


class CountingStore(InMemoryTaskStore):
    """The in-memory store, counting the journal's writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []  # how many steps each write carried

    async def record_step(self, task_id: str, epoch: int, step: StepRecord) -> StepRecord:
        self.writes.append(1)
        return await super().record_step(task_id, epoch, step)

    async def record_steps(self, task_id: str, epoch: int, steps: Any) -> list[StepRecord]:
        self.writes.append(len(steps))
        return [await InMemoryTaskStore.record_step(self, task_id, epoch, s) for s in steps]


async def _running(store: InMemoryTaskStore, task_id: str) -> None:
    snapshot = make_snapshot(task_id)
    await store.create(snapshot)
    for to in (S.QUEUED, S.STARTING, S.RUNNING):
        moved, transition = next_step(snapshot, to, owner="node-a")
        await store.save(moved, expect_version=snapshot.status_version, transitions=[transition])
        snapshot = moved


async def _children(store: InMemoryTaskStore, parent: str, count: int) -> list[Any]:
    made = []
    for n in range(count):
        child = make_snapshot(f"{parent}-c{n}", name="charge")
        await store.create(child)
        queued, transition = next_step(child, S.QUEUED)
        await store.save(queued, expect_version=child.status_version, transitions=[transition])
        await store.link_child(parent, child.task_id)
        made.append(queued)
    return made


async def _end(store: InMemoryTaskStore, child: Any, result: int) -> None:
    snapshot = child
    for to in (S.STARTING, S.RUNNING, S.SUCCEEDED):
        extra: dict[str, Any] = {"result": result} if to is S.SUCCEEDED else {}
        moved, transition = next_step(snapshot, to, owner="node-b", **extra)
        await store.save(moved, expect_version=snapshot.status_version, transitions=[transition])
        snapshot = moved


async def _beat() -> None:
    pass


def _shape(steps: list[StepRecord], parent: str) -> list[tuple[Any, ...]]:
    """The records with the parent's name taken out of them (two parents compare)."""

    def plain(text: str) -> str:
        return text.replace(f"{parent}-", "")

    return [
        (plain(s.name), s.occurrence, s.after and (plain(s.after[0]), s.after[1]), s.value)
        for s in steps
    ]


async def _journal(store: InMemoryTaskStore, parent: str) -> Journal:
    epoch = await store.begin_durable_attempt(parent, "node-a", max_resumes=3)
    return Journal(store, parent, epoch, await store.steps(parent))


async def test_ended_children_are_decided_in_one_write_with_the_records_of_one_by_one() -> None:
    async with CountingStore() as store:
        for parent in ("batched", "single"):
            await _running(store, parent)
            for n, child in enumerate(await _children(store, parent, 4)):
                await _end(store, child, result=n * 10)
        handles = [ChildHandle(task_id=f"batched-c{n}", name="charge") for n in range(4)]
        journal = await _journal(store, "batched")
        ends = await journal.gathered(handles, _beat)
        assert [end.result() for end in ends] == [0, 10, 20, 30]
        assert store.writes == [8]  # four pairs, one write

        single = await _journal(store, "single")
        for n in range(4):  # what a wait per child writes
            await single.wait_for_fact(
                f"child:single-c{n}", timeout=None, check=None, poll_interval=0.01, beat=_beat
            )
        assert _shape(await store.steps("batched"), "batched") == _shape(
            await store.steps("single"), "single"
        )

        store.writes.clear()
        replay = await _journal(store, "batched")
        again = await replay.gathered(handles, _beat)
        assert [end.result() for end in again] == [0, 10, 20, 30]
        assert store.writes == []  # a replay reads its records and writes nothing
        assert replay.replays == 8


async def test_a_gather_waits_for_the_first_child_still_running_then_batches_the_rest() -> None:
    async with CountingStore() as store:
        await _running(store, "p")
        first, second, third = await _children(store, "p", 3)
        await _end(store, first, result=1)
        journal = await _journal(store, "p")
        handles = [ChildHandle(task_id=f"p-c{n}", name="charge") for n in range(3)]
        gathering = asyncio.ensure_future(journal.gathered(handles, _beat))
        for _ in range(200):  # the first child is decided; the gather waits for the second
            if len(await store.steps("p")) >= 3:
                break
            await asyncio.sleep(0.01)
        assert not gathering.done()
        await _end(store, third, result=3)  # ended before the one waited for
        await _end(store, second, result=2)
        async with asyncio.timeout(5):
            ends = await gathering
        assert [end.result() for end in ends] == [1, 2, 3]
        # c0's pair in one write; c1 waited for on its own (deadline, decision); then c2's pair.
        assert store.writes == [2, 1, 1, 2]
        names = [step.name for step in await store.steps("p")]
        assert names == [
            f"fact:child:p-c{n}{suffix}" for n in range(3) for suffix in (":deadline", "")
        ]


async def test_as_completed_writes_its_deadlines_together_and_each_answer_together() -> None:
    async with CountingStore() as store:
        await _running(store, "p")
        for n, child in enumerate(await _children(store, "p", 4)):
            await _end(store, child, result=n)
        journal = await _journal(store, "p")
        handles = [ChildHandle(task_id=f"p-c{n}", name="charge") for n in range(4)]
        seen = [end.result() async for end in journal.as_completed(handles, _beat)]
        assert sorted(seen) == [0, 1, 2, 3]
        # The four deadlines in one write; the answer (children:any + four decisions) in one.
        assert store.writes == [4, 5]
        store.writes.clear()
        replay = await _journal(store, "p")
        assert [end.result() async for end in replay.as_completed(handles, _beat)] == seen
        assert store.writes == []
