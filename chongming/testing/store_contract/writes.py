"""``apply_writes`` (the write-through batch) and ``task_counts``."""

from __future__ import annotations

import asyncio

from chongming.errors import PayloadError, StoreClosed
from chongming.state.query import TaskQuery
from chongming.state.records import Progress
from chongming.stores.nodes import TaskCount
from chongming.stores.writes import StateWrite, WriteOutcome
from chongming.testing.store_contract._support import (
    _S,
    ContractBase,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["WriteContract"]

_W = WriteOutcome


class WriteContract(ContractBase):
    async def test_a_mixed_batch_gives_each_write_its_own_outcome(self) -> None:
        async with self._store() as store:
            held = make_snapshot("held")
            moved = make_snapshot("moved")
            await store.create(held)
            await store.create(moved)
            moved_on, step = next_step(moved, _S.QUEUED)
            await store.save(moved_on, expect_version=0, transitions=[step])

            fresh = make_snapshot("fresh", label="new one")
            held_next, held_step = next_step(held, _S.QUEUED, owner="node-a")
            stale, stale_step = next_step(moved, _S.CANCELLED)  # written against version 0
            ghost, ghost_step = next_step(make_snapshot("ghost"), _S.QUEUED)
            twin = make_snapshot("held", label="a different task with the same id")
            batch = [
                StateWrite(snapshot=fresh, transitions=()),
                StateWrite(snapshot=stale, transitions=[stale_step], expect_version=0),
                StateWrite(snapshot=held_next, transitions=[held_step], expect_version=0),
                StateWrite(snapshot=twin, transitions=()),
                StateWrite(snapshot=ghost, transitions=[ghost_step], expect_version=0),
            ]
            results = await store.apply_writes(batch)
            assert [r.outcome for r in results] == [
                _W.WRITTEN,
                _W.CONFLICT,
                _W.WRITTEN,
                _W.DUPLICATE,
                _W.NOT_FOUND,
            ]
            assert all(r.error is None for r in results)
            # The store holds exactly the written ones.
            assert await store.get("fresh") == fresh
            assert await store.get("held") == held_next
            assert await store.get("moved") == moved_on
            assert await store.get("ghost") is None
            assert [t.version for t in await store.history("held")] == [1]
            assert await store.history("moved") == [step]
            assert await store.history("ghost") == []
            ids = [s.task_id for s in await store.query(TaskQuery())]
            assert sorted(ids) == ["fresh", "held", "moved"]

    async def test_a_batch_moves_many_tasks_and_one_task_several_times(self) -> None:
        async with self._store() as store:
            snapshots = [make_snapshot(f"t{i:03}") for i in range(300)]
            results = await store.apply_writes(
                [StateWrite(snapshot=s, transitions=()) for s in snapshots]
            )
            assert {r.outcome for r in results} == {_W.WRITTEN}
            queued, step_1 = next_step(snapshots[0], _S.QUEUED)
            starting, step_2 = next_step(queued, _S.STARTING)
            results = await store.apply_writes(
                [
                    StateWrite(snapshot=queued, transitions=[step_1], expect_version=0),
                    StateWrite(snapshot=starting, transitions=[step_2], expect_version=1),
                ]
            )
            assert [r.outcome for r in results] == [_W.WRITTEN, _W.WRITTEN]
            assert await store.get("t000") == starting
            assert await store.history("t000") == [step_1, step_2]
            assert len(await store.query(TaskQuery())) == 300

    async def test_a_touch_racing_a_state_write_never_half_applies_it(self) -> None:
        """Progress and heartbeats arrive while state writes are in flight (write-through).

        Whatever order the store runs them in, each write is whole: the
        snapshot holds the new version, the history ends at it, and the
        touch's progress is kept.
        """
        async with self._store() as store:
            tasks = [make_snapshot(f"t{i}") for i in range(20)]
            for task in tasks:
                await store.create(task)
            moves = [next_step(task, _S.QUEUED) for task in tasks]
            writes = [
                StateWrite(snapshot=moved, transitions=[step], expect_version=0)
                for moved, step in moves
            ]
            progress = Progress(done=5, total=10)
            batch = asyncio.ensure_future(store.apply_writes(writes))
            await asyncio.gather(*(store.touch(t.task_id, progress=progress) for t in tasks))
            results = await batch
            assert [r.outcome for r in results] == [_W.WRITTEN] * len(tasks)
            for (_moved, step), task in zip(moves, tasks, strict=True):
                stored = await store.get(task.task_id)
                assert stored is not None
                assert stored.status_version == 1, task.task_id
                assert stored.status is _S.QUEUED
                assert await store.history(task.task_id) == [step]
            starts = [next_step(moved, _S.STARTING) for moved, _ in moves]
            saves = [store.save(started, 1, [step]) for started, step in starts]
            again = [store.touch(task.task_id, progress=progress) for task in tasks]
            await asyncio.gather(*saves, *again)
            for task in tasks:
                stored = await store.get(task.task_id)
                assert stored is not None
                assert stored.status_version == 2, task.task_id
                assert [t.version for t in await store.history(task.task_id)] == [1, 2]

    async def test_a_resent_write_that_is_already_stored_is_written(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            write = StateWrite(snapshot=snapshot, transitions=())
            assert (await store.apply_writes([write]))[0].outcome is _W.WRITTEN
            assert (await store.apply_writes([write]))[0].outcome is _W.WRITTEN
            queued, step = next_step(snapshot, _S.QUEUED)
            save = StateWrite(snapshot=queued, transitions=[step], expect_version=0)
            assert (await store.apply_writes([save]))[0].outcome is _W.WRITTEN
            assert (await store.apply_writes([save]))[0].outcome is _W.WRITTEN
            other, other_step = next_step(snapshot, _S.CANCELLED)
            lost = StateWrite(snapshot=other, transitions=[other_step], expect_version=0)
            assert (await store.apply_writes([lost]))[0].outcome is _W.CONFLICT
            assert await store.history("t") == [step]

    async def test_a_payload_error_raises_and_a_closed_store_raises(self) -> None:
        async with self._store() as store:
            good = make_snapshot("good")
            bad = make_snapshot("bad", label="nul\x00label")
            await _raises(
                PayloadError,
                store.apply_writes(
                    [
                        StateWrite(snapshot=good, transitions=()),
                        StateWrite(snapshot=bad, transitions=()),
                    ]
                ),
            )
            assert await store.get("bad") is None
            assert await store.apply_writes([]) == []
            await store.close()
            await _raises(
                StoreClosed, store.apply_writes([StateWrite(snapshot=good, transitions=())])
            )

    # -- counts ----------------------------------------------------------------

    async def test_task_counts_group_by_status_bucket_and_owner(self) -> None:
        async with self._store() as store:
            assert await store.task_counts() == []
            layout = [
                ("a", _S.RUNNING, 1, "node-a"),
                ("b", _S.RUNNING, 1, "node-a"),
                ("c", _S.RUNNING, 2, "node-a"),
                ("d", _S.RUNNING, 1, None),
                ("e", _S.QUEUED, None, "node-b"),
                ("f", _S.SUCCEEDED, 1, "node-a"),
                ("g", _S.SUCCEEDED, 1, "node-a"),
                ("h", _S.LOST, None, None),
            ]
            for task_id, status, bucket, owner in layout:
                await store.create(
                    make_snapshot(task_id, status=status, bucket=bucket, owner=owner)
                )
            expected = [
                TaskCount(status=_S.LOST, bucket=None, owner=None, count=1),
                TaskCount(status=_S.QUEUED, bucket=None, owner="node-b", count=1),
                TaskCount(status=_S.RUNNING, bucket=1, owner=None, count=1),
                TaskCount(status=_S.RUNNING, bucket=1, owner="node-a", count=2),
                TaskCount(status=_S.RUNNING, bucket=2, owner="node-a", count=1),
                TaskCount(status=_S.SUCCEEDED, bucket=1, owner="node-a", count=2),
            ]
            assert await store.task_counts() == expected
            active = [c for c in expected if not c.status.is_terminal]
            assert await store.task_counts(active_only=True) == active
