"""A worker whose admission launches at once claims tasks already ``starting``.

The claim writes ``starting`` with it (``TaskStore.claim_started``); under
limits the worker claims them ``queued`` as before. A started claim that
still finds no free slot (a local run took it meanwhile) waits for one at
``starting``: it can be stopped, it launches once a slot frees, and a worker
closing first gives it back to the queue.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, SqliteTaskStore, TaskNotFound, TaskStatus, Timeout
from tests.conftest import FAST


async def record(ctx: Any, tag: str) -> str:
    await ctx.checkpoint()
    return tag.upper()


async def loops(ctx: Any) -> None:
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.01)


def _worker(path: Path, **options: Any) -> Controller:
    worker = Controller(
        store=path, owner="w", work=True, poll_interval=0.05, windows=FAST, **options
    )
    worker.register("record", record)
    worker.register("loops", loops)
    return worker


def _count_claims(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"claim": 0, "claim_started": 0, "histories": 0}
    for name in calls:
        original = getattr(SqliteTaskStore, name)

        def counting(
            store: Any, *args: Any, _name: str = name, _original: Any = original, **kw: Any
        ) -> Any:
            calls[_name] += 1
            return _original(store, *args, **kw)

        monkeypatch.setattr(SqliteTaskStore, name, counting)
    return calls


async def _steps(client: Controller, task_id: str) -> list[tuple[str, str]]:
    return [(t.to_status.value, t.trigger) for t in await client.history(task_id)]


async def test_an_unlimited_worker_claims_tasks_started_in_one_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = [await client.enqueue("record", f"t{n}", task_id=f"t-{n}") for n in range(6)]
        calls = _count_claims(monkeypatch)
        async with _worker(db, max_parallel=4) as worker:
            finals = [await task.wait(timeout=20) for task in queued]
            counts = (await worker.stats()).by_status
        monkeypatch.undo()
        assert counts == {"succeeded": 6}  # claimed at starting, counted from there
        assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 6
        assert [f.result for f in finals] == [f"T{n}" for n in range(6)]
        assert calls["claim_started"] >= 2
        assert calls["claim"] == 0
        assert calls["histories"] == 0  # the claim answered them
        assert await _steps(client, "t-0") == [
            ("queued", "orchestrator:enqueued"),
            ("starting", "scheduler:dispatch"),
            ("running", "executor:launched"),
            ("succeeded", "executor:completed"),
        ]
        final = finals[0]
        assert (final.status_version, final.attempt, final.owner) == (4, 1, "w")


async def test_a_worker_under_limits_claims_them_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = [await client.enqueue("record", "x", task_id=f"t-{n}") for n in range(3)]
        calls = _count_claims(monkeypatch)
        async with _worker(db, max_parallel_per_bucket=2):
            finals = [await task.wait(timeout=20) for task in queued]
        monkeypatch.undo()
    assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 3
    assert calls["claim"] >= 1
    assert calls["claim_started"] == 0


def _race_for_the_slot(monkeypatch: pytest.MonkeyPatch, worker: Controller) -> list[Any]:
    """While the first started claim is on its way, a local run takes the only slot."""
    claim_started = SqliteTaskStore.claim_started
    local: list[Any] = []

    async def racing(store: SqliteTaskStore, owner: str, **options: Any) -> Any:
        if not local:
            local.append(await worker.submit("loops", task_id="local"))
        return await claim_started(store, owner, **options)

    monkeypatch.setattr(SqliteTaskStore, "claim_started", racing)
    return local


async def _waiting_at_starting(worker: Controller, task_id: str) -> Any:
    async with asyncio.timeout(20):
        while True:
            try:
                run = worker.run_for(task_id)
            except TaskNotFound:
                await asyncio.sleep(0.01)
            else:
                break
    assert run.status is TaskStatus.STARTING  # its claim started it; no slot yet
    assert not run.holds_slot
    return run


async def test_a_started_claim_waiting_for_a_slot_launches_when_one_frees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "late", task_id="q")
        worker = _worker(db, max_parallel=1)
        local = _race_for_the_slot(monkeypatch, worker)
        async with worker:
            await _waiting_at_starting(worker, "q")
            assert local[0].holds_slot  # the only one
            await local[0].stop()
            final = await queued.wait(timeout=20)
        monkeypatch.undo()
        assert (final.status, final.result) == (TaskStatus.SUCCEEDED, "LATE")
        assert [s for s, _ in await _steps(client, "q")] == [
            "queued",
            "starting",
            "running",
            "succeeded",
        ]


async def test_a_started_claim_waiting_for_a_slot_can_be_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "late", task_id="q")
        worker = _worker(db, max_parallel=1)
        _race_for_the_slot(monkeypatch, worker)
        async with worker:
            run = await _waiting_at_starting(worker, "q")
            assert await run.stop(reason="not now") is True
            final = await queued.wait(timeout=20)
        monkeypatch.undo()
        assert final.status is TaskStatus.STOPPED
        assert [s for s, _ in await _steps(client, "q")] == [
            "queued",
            "starting",
            "stopping",
            "stopped",
        ]


async def test_a_started_claim_that_never_launched_goes_back_when_the_worker_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "late", task_id="q")
        worker = _worker(db, max_parallel=1)
        _race_for_the_slot(monkeypatch, worker)
        async with worker:
            await _waiting_at_starting(worker, "q")
        monkeypatch.undo()
        back = await queued.get()
        assert (back.status, back.owner) == (TaskStatus.QUEUED, None)
        assert [s for s, _ in await _steps(client, "q")] == [
            "queued",
            "starting",
            "retry_wait",
            "queued",
        ]
        async with _worker(db) as again:
            final = await queued.wait(timeout=20)
            assert again.run_for("q").status is TaskStatus.SUCCEEDED
        # the start given back never ran: the one that did is attempt 1 (issue 22, case 9)
        assert (final.status, final.result, final.attempt) == (TaskStatus.SUCCEEDED, "LATE", 1)


async def test_a_start_timeout_still_holds_for_a_started_claim_waiting_for_a_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "late", task_id="q")
        worker = Controller(
            store=db, owner="w", work=True, max_parallel=1, poll_interval=0.05, windows=FAST
        )
        worker.register("record", record, timeout=Timeout(start=0.3))
        worker.register("loops", loops)
        _race_for_the_slot(monkeypatch, worker)
        async with worker:
            await _waiting_at_starting(worker, "q")
            final = await queued.wait(timeout=20)
        monkeypatch.undo()
    assert final.status is TaskStatus.FAILED
    assert final.failure is not None
    assert final.failure.kind.value == "timeout_start"


async def test_a_dead_workers_started_claim_is_recorded_lost_never_run_again(
    tmp_path: Path,
) -> None:
    from datetime import UTC, datetime

    from chongming.stores.nodes import NodeInfo

    db = tmp_path / "q.db"
    async with SqliteTaskStore(db) as store, Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "r", task_id="started")
        dead = NodeInfo(
            owner="dead-worker", incarnation="i-1", host="h", pid=1, version="0", num_buckets=64
        )
        await store.register_node(dead, ttl_seconds=0.2)
        [claimed] = await store.claim_started(
            "dead-worker", serves={"record": (None,)}, limit=1, at=datetime.now(UTC)
        )
        assert claimed.snapshot.status is TaskStatus.STARTING
        while any(node.live for node in await store.nodes()):
            await asyncio.sleep(0.05)  # the worker "died" before launching it
        report = await client.reconcile()
        assert [(e.task_id, e.outcome.value) for e in report.entries] == [("started", "lost")]
        final = await queued.get()
        assert final.status is TaskStatus.LOST  # it may have begun: nobody runs it again
