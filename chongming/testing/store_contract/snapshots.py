"""Lifecycle and snapshots: open, close, create, compare-and-set save."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from chongming.errors import (
    DuplicateTaskId,
    StoreClosed,
    TaskNotFound,
    VersionConflict,
)
from chongming.state.fold import fold_history
from chongming.state.query import TaskQuery
from chongming.state.records import Failure, FailureKind, Progress
from chongming.stores.writes import StateWrite
from chongming.testing.store_contract._support import (
    _S,
    T0,
    ContractBase,
    _command,
    _node,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["SnapshotContract"]


class SnapshotContract(ContractBase):
    # -- lifecycle -----------------------------------------------------------

    async def test_fresh_store_opens_implicitly_and_is_empty(self) -> None:
        async with self._store() as store:
            assert await store.get("nope") is None
            assert await store.history("nope") == []
            assert await store.query(TaskQuery()) == []
            assert await store.claim_commands("node-a", lease_seconds=30) == []

    async def test_async_with_opens_and_closes(self) -> None:
        async with self._store() as store:
            async with store as entered:
                assert entered is store
                await store.create(make_snapshot("t"))
            await _raises(StoreClosed, store.get("t"))

    async def test_close_is_idempotent_and_every_method_then_raises(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            await store.close()
            await store.close()
            _, transition = next_step(snapshot, _S.QUEUED)
            calls: list[Callable[[], Awaitable[object]]] = [
                store.open,
                lambda: store.create(make_snapshot("u")),
                lambda: store.save(snapshot, expect_version=0),
                lambda: store.get("t"),
                lambda: store.query(TaskQuery()),
                lambda: store.append([transition]),
                lambda: store.history("t"),
                lambda: store.touch("t", heartbeat=T0),
                lambda: store.submit_command(_command("c")),
                lambda: store.claim_commands("n", lease_seconds=1),
                lambda: store.complete_command("c", "n"),
                lambda: store.release_command("c", "n"),
                lambda: store.command_records(),
                lambda: store.register_node(_node("n"), ttl_seconds=1),
                lambda: store.renew_node("n", "i", ttl_seconds=1),
                lambda: store.release_node("n", "i"),
                lambda: store.nodes(),
                lambda: store.task_counts(),
                lambda: store.apply_writes(
                    [StateWrite(snapshot=make_snapshot("v"), transitions=())]
                ),
            ]
            for call in calls:
                await _raises(StoreClosed, call())

    # -- snapshots -----------------------------------------------------------

    async def test_create_then_get_round_trips_every_field(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot(
                "full",
                status=_S.RETRY_WAIT,
                status_version=7,
                attempt=2,
                bucket=7,
                bucket_key="tenant-A",
                tags=frozenset({"io", "cpu"}),
                priority=-5,
                owner="node-a",
                queued_at=T0 + timedelta(seconds=1),
                started_at=T0 + timedelta(seconds=2),
                last_heartbeat_at=T0 + timedelta(seconds=3),
                progress=Progress(done=2.5, total=6, unit="parts", message="day/part2"),
                failure=Failure(
                    kind=FailureKind.TIMEOUT_ATTEMPT,
                    message="took too long",
                    exception_type="TimeoutError",
                    retryable=True,
                ),
                result={"nested": [1, 2.5, None, True, "s"], "empty": {}},
                args=("2026-10-02", [1, 2], {"k": "v"}),
                kwargs={"limit": 10, "flag": False},
            )
            await store.create(snapshot)
            assert await store.get("full") == snapshot

    async def test_create_writes_its_first_transitions(self) -> None:
        async with self._store() as store:
            queued, transition = next_step(make_snapshot("t"), _S.QUEUED)
            await store.create(queued, [transition])
            assert await store.history("t") == [transition]
            assert await store.get("t") == queued

    async def test_duplicate_create_raises_and_writes_nothing(self) -> None:
        async with self._store() as store:
            original = make_snapshot("t", label="first")
            await store.create(original)
            other, transition = next_step(make_snapshot("t", label="second"), _S.QUEUED)
            error = await _raises(DuplicateTaskId, store.create(other, [transition]))
            assert error.task_id == "t"
            assert await store.get("t") == original
            assert await store.history("t") == []

    async def test_save_with_the_expected_version_replaces_the_snapshot(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            queued, transition = next_step(snapshot, _S.QUEUED, owner="node-a", priority=3)
            await store.save(queued, expect_version=0, transitions=[transition])
            assert await store.get("t") == queued
            assert await store.history("t") == [transition]

    async def test_stale_save_conflicts_and_writes_nothing(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            queued, first = next_step(snapshot, _S.QUEUED)
            await store.save(queued, expect_version=0, transitions=[first])
            rival, rival_transition = next_step(snapshot, _S.CANCELLED, reason="stale writer")
            error = await _raises(
                VersionConflict, store.save(rival, expect_version=0, transitions=[rival_transition])
            )
            assert (error.task_id, error.expected, error.actual) == ("t", 0, 1)
            assert await store.get("t") == queued
            assert await store.history("t") == [first]

    async def test_save_of_an_unknown_task_raises_and_writes_nothing(self) -> None:
        async with self._store() as store:
            queued, transition = next_step(make_snapshot("ghost"), _S.QUEUED)
            error = await _raises(
                TaskNotFound, store.save(queued, expect_version=0, transitions=[transition])
            )
            assert error.task_id == "ghost"
            assert isinstance(error, LookupError)
            assert await store.get("ghost") is None
            assert await store.history("ghost") == []

    async def test_concurrent_saves_of_one_version_have_exactly_one_winner(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)

            async def attempt(i: int) -> tuple[int, bool]:
                new, transition = next_step(snapshot, _S.QUEUED, owner=f"node-{i}")
                try:
                    await store.save(new, expect_version=0, transitions=[transition])
                except VersionConflict:
                    return i, False
                return i, True

            outcomes = await asyncio.gather(*(attempt(i) for i in range(40)))
            winners = [i for i, won in outcomes if won]
            assert len(winners) == 1
            stored = await store.get("t")
            assert stored is not None
            assert stored.owner == f"node-{winners[0]}"
            assert stored.status_version == 1
            assert len(await store.history("t")) == 1

    async def test_concurrent_trajectories_keep_every_history_whole(self) -> None:
        async with self._store() as store:
            ids = [f"task-{i:02d}" for i in range(25)]
            finals = await asyncio.gather(*(self._trajectory(store, i) for i in ids))
            for final in finals:
                history = await store.history(final.task_id)
                assert [t.version for t in history] == [1, 2, 3, 4]
                folded = fold_history(history)
                assert (folded.status, folded.status_version) == (_S.SUCCEEDED, 4)
                assert await store.get(final.task_id) == final
