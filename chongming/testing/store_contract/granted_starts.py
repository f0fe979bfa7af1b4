"""Starting what a plain claim took (``start_claimed``): a rate-limited claimer's second step.

Part of the queue: mix :class:`StartClaimedContract` into a contract subclass
of a backend that implements ``start_claimed``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from chongming.errors import PayloadError
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.testing.store_contract._support import T0, _raises, next_step
from chongming.testing.store_contract.queue import QueueContract

__all__ = ["StartClaimedContract"]

_S = TaskStatus
_SERVES = {"extract": [None]}


class StartClaimedContract(QueueContract):
    async def test_start_claimed_writes_what_a_started_claim_writes(self) -> None:
        async with self._store() as store:
            for n in range(3):
                at = T0 + timedelta(seconds=n)
                await self._enqueue(store, f"q-{n}", created_at=at, updated_at=at)
            claimed = await store.claim("node-a", serves=_SERVES, limit=3)
            at = T0 + timedelta(minutes=5, microseconds=7)
            # the claimer starts two of the three, in its own order
            started = await store.start_claimed("node-a", [claimed[2], claimed[0]], at=at)
            assert [c.snapshot.task_id for c in started] == ["q-2", "q-0"]
            for task in started:
                snapshot = task.snapshot
                assert (snapshot.status, snapshot.owner) == (_S.STARTING, "node-a")
                assert (snapshot.status_version, snapshot.attempt) == (2, 1)
                assert snapshot.updated_at == at
                assert await store.get(snapshot.task_id) == snapshot
                history = await store.history(snapshot.task_id)
                assert list(task.history) == history
                assert history[-1] == Transition(
                    task_id=snapshot.task_id,
                    version=2,
                    from_status=_S.QUEUED,
                    to_status=_S.STARTING,
                    at=at,
                    trigger="scheduler:dispatch",
                    actor="system",
                    reason=None,
                    attempt=1,
                )
            left = await store.get("q-1")
            assert left is not None
            assert (left.status, left.owner, left.status_version) == (_S.QUEUED, "node-a", 1)
            assert await store.release_claim("q-1", "node-a", 1)  # the one not started goes back
            assert not await store.release_claim("q-0", "node-a", 1)  # a started one does not

    async def test_start_claimed_starts_only_what_is_still_held_at_its_claimed_version(
        self,
    ) -> None:
        async with self._store() as store:
            for n in range(4):
                await self._enqueue(store, f"q-{n}", created_at=T0 + timedelta(seconds=n))
            mine = await store.claim("node-a", serves=_SERVES, limit=3)
            theirs = await store.claim("node-b", serves=_SERVES, limit=1)
            assert [t.task_id for t in theirs] == ["q-3"]
            # q-0 is stopped meanwhile; q-1 is given back and claimed again by node-b
            stopped, step = next_step(mine[0], _S.CANCELLED, trigger="user:stop")
            await store.save(stopped, expect_version=1, transitions=[step])
            assert await store.release_claim("q-1", "node-a", 1)
            assert [t.task_id for t in await store.claim("node-b", serves=_SERVES)] == ["q-1"]
            at = T0 + timedelta(minutes=1)
            # node-a may start only q-2; node-a cannot start node-b's q-3 either
            started = await store.start_claimed("node-a", [*mine, theirs[0]], at=at)
            assert [c.snapshot.task_id for c in started] == ["q-2"]
            for task_id, status, owner in (
                ("q-0", _S.CANCELLED, "node-a"),
                ("q-1", _S.QUEUED, "node-b"),
                ("q-3", _S.QUEUED, "node-b"),
            ):
                stored = await store.get(task_id)
                assert stored is not None
                assert (stored.status, stored.owner) == (status, owner)
            # asked again, nothing starts twice
            assert await store.start_claimed("node-a", mine, at=at + timedelta(seconds=1)) == []
            assert len(await store.history("q-2")) == 2

    async def test_racing_starts_of_one_claim_start_each_task_once(self) -> None:
        async with self._store() as store:
            for n in range(6):
                await self._enqueue(store, f"q-{n}")
            claimed = await store.claim("node-a", serves=_SERVES, limit=6)
            at = T0 + timedelta(hours=1)
            answers = await asyncio.gather(
                *(
                    store.start_claimed("node-a", claimed, at=at + timedelta(seconds=n))
                    for n in range(4)
                )
            )
            started = sorted(c.snapshot.task_id for answer in answers for c in answer)
            assert started == [f"q-{n}" for n in range(6)]
            for n in range(6):
                assert [t.version for t in await store.history(f"q-{n}")] == [1, 2]

    async def test_start_claimed_refuses_bad_arguments_and_writes_nothing(self) -> None:
        async with self._store() as store:
            await self._enqueue(store, "q-1")
            [claimed] = await store.claim("node-a", serves=_SERVES)
            for owner, tasks, at in (
                ("", [claimed], T0),
                ("n\x00", [claimed], T0),
                ("node-a", "q-1", T0),
                ("node-a", ["q-1"], T0),
                ("node-a", [claimed, claimed], T0),
                ("node-a", [claimed], "2026-10-02"),
                ("node-a", [claimed], T0.replace(tzinfo=None)),
            ):
                await _raises(
                    PayloadError,
                    store.start_claimed(owner, tasks, at=at),  # type: ignore[arg-type]
                )
            stored = await store.get("q-1")
            assert stored is not None
            assert (stored.status, stored.owner, stored.status_version) == (_S.QUEUED, "node-a", 1)
            assert await store.start_claimed("node-a", [], at=T0) == []
