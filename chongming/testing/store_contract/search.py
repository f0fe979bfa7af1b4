"""Search: a label part (no pattern characters), an idempotency key, a creation time range.

Optional for a third-party store: mix :class:`SearchContract` into a
contract subclass only if the backend implements ``search_tasks``. It needs
the work queue (a key is given by ``enqueue``).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from chongming.state.query import TaskQuery
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.search import TaskSearch
from chongming.testing.store_contract._support import T0, ContractBase, make_snapshot, next_step

__all__ = ["SearchContract"]

_S = TaskStatus
LABELS = ("nightly sync", "50%_off <script>", "5000 off", "weekly SYNC", "nightly sync again")


class SearchContract(ContractBase):
    async def _tasks(self, store: TaskStore) -> None:
        for i, label in enumerate(LABELS):
            await store.create(
                make_snapshot(f"t-{i}", label=label, created_at=T0 + timedelta(seconds=i))
            )
        pending = make_snapshot(
            "keyed", label="keyed one", idempotency_key="order-7", created_at=T0
        )
        queued, transition = next_step(pending, _S.QUEUED, trigger="orchestrator:enqueued")
        queued = dataclasses.replace(queued, queued_at=queued.updated_at)
        assert (await store.enqueue(queued, [transition])).created

    async def _ids(self, store: TaskStore, **fields: object) -> list[str]:
        found = await store.search_tasks(TaskSearch(**fields))  # type: ignore[arg-type]
        return [snapshot.task_id for snapshot in found]

    async def test_a_label_part_matches_as_plain_text_in_creation_order(self) -> None:
        async with self._store() as store:
            await self._tasks(store)
            assert await self._ids(store, label="nightly") == ["t-0", "t-4"]
            assert await self._ids(store, label="50%_") == ["t-1"]  # % and _ are no wildcards
            assert await self._ids(store, label="0_o") == []
            assert await self._ids(store, label="SYNC") == ["t-3"]  # case-sensitive
            assert await self._ids(store, label="<script>") == ["t-1"]
            limited = TaskQuery(limit=1)
            assert await self._ids(store, label="sync", query=limited) == ["t-0"]
            queued = TaskQuery(statuses=frozenset({_S.QUEUED}))
            assert await self._ids(store, label="one", query=queued) == ["keyed"]
            assert await self._ids(store, label="sync", query=queued) == []

    async def test_an_idempotency_key_finds_its_task_only(self) -> None:
        async with self._store() as store:
            await self._tasks(store)
            assert await self._ids(store, idempotency_key="order-7") == ["keyed"]
            assert await self._ids(store, idempotency_key="order-") == []
            assert await self._ids(store, idempotency_key="order-7", label="nightly") == []

    async def test_a_time_range_is_from_inclusive_to_exclusive(self) -> None:
        async with self._store() as store:
            await self._tasks(store)
            window = {"created_from": T0 + timedelta(seconds=1), "created_to": T0 + timedelta(3)}
            assert await self._ids(store, **window) == ["t-1", "t-2", "t-3", "t-4"]
            exact = {
                "created_from": T0 + timedelta(seconds=1),
                "created_to": T0 + timedelta(seconds=3),
            }
            assert await self._ids(store, **exact) == ["t-1", "t-2"]
            assert await self._ids(store, created_to=T0 + timedelta(seconds=1)) == ["keyed", "t-0"]
            assert await self._ids(store, created_from=T0 + timedelta(hours=1)) == []
