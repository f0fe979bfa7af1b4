"""History, the hot path and queries."""

from __future__ import annotations

import dataclasses
from datetime import timedelta, timezone

from chongming.state.fold import fold_history
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot
from chongming.testing.store_contract._support import (
    _PATH,
    _S,
    T0,
    ContractBase,
    _order,
    make_snapshot,
    next_step,
)

__all__ = ["HistoryContract"]


class HistoryContract(ContractBase):
    # -- history -------------------------------------------------------------

    async def test_history_is_in_version_order_and_folds_to_the_snapshot(self) -> None:
        async with self._store() as store:
            final = await self._trajectory(store, "t")
            history = await store.history("t")
            assert [(t.from_status, t.to_status) for t in history] == [
                (_S.PENDING, _S.QUEUED),
                (_S.QUEUED, _S.STARTING),
                (_S.STARTING, _S.RUNNING),
                (_S.RUNNING, _S.SUCCEEDED),
            ]
            folded = fold_history(history)
            assert (folded.status, folded.status_version) == (final.status, final.status_version)

    async def test_append_is_idempotent_per_version_and_sorted(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            transitions = []
            for to in _PATH:
                snapshot, transition = next_step(snapshot, to)
                transitions.append(transition)
            await store.append([transitions[2], transitions[0]])
            await store.append([transitions[1], transitions[3], transitions[0]])
            impostor = dataclasses.replace(transitions[1], trigger="impostor", reason="again")
            await store.append([impostor])
            assert await store.history("t") == transitions

    async def test_save_appends_only_new_versions(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            queued, transition = next_step(snapshot, _S.QUEUED)
            await store.append([transition])
            await store.save(queued, expect_version=0, transitions=[transition])
            assert await store.history("t") == [transition]

    # -- hot path ------------------------------------------------------------

    async def test_touch_updates_progress_and_heartbeat_but_never_the_version(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            progress = Progress(done=3, total=6, unit="parts", message="part 3")
            beat = T0 + timedelta(minutes=5, microseconds=7)
            await store.touch("t", progress=progress, heartbeat=beat)
            stored = await store.get("t")
            assert stored is not None
            assert (stored.progress, stored.last_heartbeat_at) == (progress, beat)
            assert stored.status_version == 0
            later = Progress(done=4, total=6)
            await store.touch("t", progress=later)
            stored = await store.get("t")
            assert stored is not None
            assert (stored.progress, stored.last_heartbeat_at) == (later, beat)
            await store.touch("t", heartbeat=beat + timedelta(seconds=1))
            stored = await store.get("t")
            assert stored is not None
            assert (stored.progress, stored.last_heartbeat_at) == (
                later,
                beat + timedelta(seconds=1),
            )
            queued, transition = next_step(stored, _S.QUEUED)
            await store.save(queued, expect_version=0, transitions=[transition])
            assert await store.get("t") == queued

    async def test_touch_naming_an_owner_lands_only_while_that_node_owns_the_task(
        self,
    ) -> None:
        async with self._store() as store:
            snapshot = dataclasses.replace(make_snapshot("t"), owner="node-b")
            await store.create(snapshot)
            await store.touch("t", progress=Progress(done=9), heartbeat=T0, owner="node-a")
            stored = await store.get("t")
            assert stored is not None
            assert (stored.progress, stored.last_heartbeat_at) == (None, None)
            await store.touch("t", progress=Progress(done=1), owner="node-b")
            stored = await store.get("t")
            assert stored is not None
            assert stored.progress == Progress(done=1)
            unowned = dataclasses.replace(make_snapshot("u"), owner=None)
            await store.create(unowned)
            await store.touch("u", heartbeat=T0, owner="node-a")
            stored = await store.get("u")
            assert stored is not None
            assert stored.last_heartbeat_at is None

    async def test_touch_of_an_unknown_task_is_ignored(self) -> None:
        async with self._store() as store:
            await store.touch("ghost", progress=Progress(done=1), heartbeat=T0)
            assert await store.get("ghost") is None
            assert await store.query(TaskQuery()) == []

    # -- queries -------------------------------------------------------------

    def _query_fixture(self) -> list[TaskSnapshot]:
        statuses = [_S.QUEUED, _S.RUNNING, _S.SUCCEEDED, _S.PAUSED, _S.LOST, _S.BLOCKED]
        tag_sets = [frozenset(), frozenset({"io"}), frozenset({"io", "cpu"}), frozenset({"%"})]
        buckets = [None, 0, 1, 7]
        names = ["extract", "crunch", "a_c", "abc"]
        owners = [None, "node-a", "node-b"]
        snapshots = []
        for i in range(24):
            snapshots.append(
                make_snapshot(
                    f"q-{23 - i:02d}",
                    status=statuses[i % len(statuses)],
                    status_version=i % 5,
                    tags=tag_sets[i % len(tag_sets)],
                    bucket=buckets[i % len(buckets)],
                    name=names[(i // 2) % len(names)],
                    owner=owners[i % len(owners)],
                    # Ties on created_at are broken by task_id; an offset must not fool the order.
                    created_at=(T0 + timedelta(seconds=i // 3)).astimezone(
                        timezone(timedelta(hours=8 if i % 2 else -5))
                    ),
                )
            )
        return snapshots

    async def test_query_filters_and_order_match_the_reference(self) -> None:
        async with self._store() as store:
            data = self._query_fixture()
            for snapshot in data:
                await store.create(snapshot)
            queries = [
                TaskQuery(),
                TaskQuery(statuses=frozenset({_S.RUNNING, _S.PAUSED})),
                TaskQuery(statuses=frozenset({_S.FAILED})),
                TaskQuery(tag="io"),
                TaskQuery(tag="%"),
                TaskQuery(tag="_"),
                TaskQuery(bucket=0),
                TaskQuery(buckets=frozenset({1, 7})),
                TaskQuery(buckets=frozenset()),
                TaskQuery(name="a_c"),
                TaskQuery(name="a%"),
                TaskQuery(owner="node-b"),
                TaskQuery(owner="node-b", tag="io", limit=2),
                TaskQuery(statuses=frozenset({_S.QUEUED, _S.LOST}), bucket=0, name="extract"),
                TaskQuery(limit=5),
                TaskQuery(limit=1000),
            ]
            for query in queries:
                expected = _order([s for s in data if query.matches(s)])[: query.limit]
                got = await store.query(query)
                assert [s.task_id for s in got] == [s.task_id for s in expected], query
                assert got == [await store.get(s.task_id) for s in expected]
