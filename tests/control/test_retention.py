"""``Controller(retention=)``: a worker prunes in the background; a prune never costs a claim."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskStatus
from chongming.errors import InvalidRetention
from chongming.plane.pruner import prune_store
from chongming.state.machine import apply_transition
from chongming.state.query import TaskQuery
from chongming.stores.base import TaskStore
from chongming.stores.retention import PruneSelection, Retention
from chongming.testing.store_contract import make_snapshot
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]  # the fixtures

_S = TaskStatus
_MONTH_AGO = datetime.now(UTC) - timedelta(days=30)


async def seed_terminal(
    store: TaskStore, task_ids: Iterable[str], at: datetime = _MONTH_AGO
) -> None:
    """Cancelled tasks (with their one transition) that ended at ``at``."""

    async def one(task_id: str) -> None:
        pending = make_snapshot(task_id, name="old", created_at=at, updated_at=at)
        cancelled, transition = apply_transition(pending, _S.CANCELLED, trigger="test:seed", at=at)
        await store.create(cancelled, [transition])

    ids = list(task_ids)
    for start in range(0, len(ids), 200):
        await asyncio.gather(*(one(task_id) for task_id in ids[start : start + 200]))


async def _ids(store: TaskStore) -> set[str]:
    return {snapshot.task_id for snapshot in await store.query(TaskQuery())}


async def record(ctx: Any, n: int) -> int:
    await ctx.checkpoint()
    return n


async def _opened(stores: StoreMaker, where: object) -> TaskStore:
    made = stores.make(where)
    if isinstance(made, Path):
        from chongming.stores.sqlite import SqliteTaskStore

        store: TaskStore = SqliteTaskStore(made)
        stores.opened.append(store)
        return store
    return made


async def test_a_worker_with_retention_prunes_old_terminal_tasks_in_the_background(
    where: object, stores: StoreMaker
) -> None:
    store = await _opened(stores, where)
    await seed_terminal(store, [f"old-{n}" for n in range(7)])
    await seed_terminal(store, ["young"], at=datetime.now(UTC) - timedelta(hours=30))
    retention = Retention(terminal=timedelta(days=7), batch=2, interval=0.05, pause=0)
    async with Controller(
        store=store, owner="w", work=True, poll_interval=0.05, windows=FAST, retention=retention
    ) as worker:
        worker.register("record", record)
        kept = await worker.enqueue("record", 1, task_id="fresh")
        assert (await kept.wait(timeout=20)).status is _S.SUCCEEDED
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while await _ids(store) != {"young", "fresh"}:
            assert loop.time() < deadline, await _ids(store)
            await asyncio.sleep(0.02)
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "chongming:pruner"]
    assert await _ids(store) == {"young", "fresh"}
    assert await store.history("old-0") == []


async def test_retention_that_is_not_a_retention_or_not_on_a_worker_is_refused(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    with pytest.raises(InvalidRetention) as caught:
        Controller(store=db, work=True, retention="7d")  # type: ignore[arg-type]
    assert caught.value.field == "retention"
    for without_a_worker in ({"store": db}, {}):
        with pytest.raises(InvalidRetention, match="applied by a worker") as caught:
            Controller(retention=Retention(), **without_a_worker)  # type: ignore[arg-type]
        assert caught.value.field == "retention"
    assert not db.exists()


async def test_retention_on_a_store_that_cannot_prune_is_refused() -> None:
    from chongming.stores.memory import InMemoryTaskStore
    from chongming.stores.ports.retention import RetentionStore

    class KeepsEverything(InMemoryTaskStore):
        prune_tasks = RetentionStore.prune_tasks

    with pytest.raises(InvalidRetention, match="KeepsEverything cannot prune"):
        Controller(store=KeepsEverything(), work=True, retention=Retention())


@pytest.mark.slow
async def test_a_prune_beside_a_draining_worker_loses_and_blocks_no_claim(
    where: object, stores: StoreMaker
) -> None:
    store = await _opened(stores, where)
    old = [f"old-{n}" for n in range(3000)]
    await seed_terminal(store, old)
    async with Controller(
        store=store, owner="w", work=True, max_parallel=8, poll_interval=0.05, windows=FAST
    ) as worker:
        worker.register("record", record)
        queued = [await worker.enqueue("record", n, task_id=f"new-{n}") for n in range(300)]
        cut = datetime.now(UTC) - timedelta(days=7)
        pruning = asyncio.create_task(
            prune_store(store, [PruneSelection(finished_before=cut)], batch=50)
        )
        finals = await asyncio.wait_for(
            asyncio.gather(*(task.wait(timeout=60) for task in queued)), timeout=90
        )
        report = await asyncio.wait_for(pruning, timeout=90)
    assert report.tasks == len(old)
    assert [final.status for final in finals] == [_S.SUCCEEDED] * len(queued)
    assert [final.result for final in finals] == list(range(len(queued)))
    assert {final.attempt for final in finals} == {1}
    left = await _ids(store)
    assert left == {f"new-{n}" for n in range(len(queued))}, "a new task was pruned or lost"
    for final in finals[:20]:
        starts = [t for t in await store.history(final.task_id) if t.to_status is _S.STARTING]
        assert len(starts) == 1, "claimed twice"


@pytest.mark.example("retention.py")
def test_the_retention_example_keeps_what_the_operator_asked_for(example: Path) -> None:
    from tests.docs.test_examples import run_example

    assert run_example(example) == [
        "stored: order-1, order-2, order-3, order-4",
        "due for pruning: 2",
        "kept after the worker's prune: order-2, order-3",
    ]
