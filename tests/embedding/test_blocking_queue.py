"""``BlockingController.enqueue``: a sync script enqueues and follows a task through the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chongming import BlockingController, BlockingQueuedTask, TaskStatus


async def double(ctx: Any, value: int) -> int:
    return value * 2


def test_a_sync_script_enqueues_and_waits_for_a_worker(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with BlockingController(store=db, owner="script", poll_interval=0.05) as client:
        queued = client.enqueue("double", 21, idempotency_key="job-1")
        assert isinstance(queued, BlockingQueuedTask)
        assert queued.created
        assert queued.get().status is TaskStatus.QUEUED  # nobody serves it yet: it waits
        with BlockingController(store=db, owner="w", work=True, poll_interval=0.05) as worker:
            worker.register("double", double)
            final = queued.wait(timeout=20)
        again = client.enqueue("double", 21, idempotency_key="job-1")
    assert final.status is TaskStatus.SUCCEEDED
    assert final.result == 42
    assert (again.created, again.task_id) == (False, queued.task_id)


def test_a_sync_script_enqueues_many_and_follows_each(tmp_path: Path) -> None:
    """Was: the facade had no ``enqueue_many`` (the async controller gained it)."""
    db = tmp_path / "q.db"
    with BlockingController(store=db, owner="script", poll_interval=0.05) as client:
        queued = client.enqueue_many("double", [((n,), {}) for n in range(3)])
        assert all(isinstance(q, BlockingQueuedTask) for q in queued)
        with BlockingController(store=db, owner="w", work=True, poll_interval=0.05) as worker:
            worker.register("double", double)
            finals = [q.wait(timeout=20) for q in queued]
            values = [q.result(timeout=20) for q in queued]
    assert [f.result for f in finals] == [0, 2, 4]
    assert values == [0, 2, 4]
