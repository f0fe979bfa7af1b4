"""``Controller(work=True)``: claim queued tasks it serves and run them like local ones."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, TaskStatus
from tests.conftest import FAST

ORDER: list[str] = []


async def record(ctx: Any, tag: str) -> str:
    ORDER.append(tag)
    await ctx.checkpoint()
    return tag.upper()


async def loops(ctx: Any) -> None:
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.01)


def _worker(path: Path, owner_name: str = "worker-1", **options: Any) -> Controller:
    worker = Controller(
        store=path, owner=owner_name, work=True, poll_interval=0.05, windows=FAST, **options
    )
    worker.register("record", record)
    worker.register("loops", loops)
    return worker


async def test_a_worker_runs_what_a_client_enqueued_best_priority_first(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    ORDER.clear()
    async with Controller(store=db, owner="client") as client:
        queued = [
            await client.enqueue("record", tag, priority=priority, task_id=f"t-{tag}")
            for tag, priority in [("low", 0), ("high", 9), ("mid", 5), ("low2", 0), ("top", 9)]
        ]
        async with _worker(db, max_parallel=1):
            finals = [await task.wait(timeout=20) for task in queued]
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 5
    assert {final.owner for final in finals} == {"worker-1"}
    assert [final.result for final in finals] == ["LOW", "HIGH", "MID", "LOW2", "TOP"]
    assert ORDER == ["high", "top", "mid", "low", "low2"]  # priority, then FIFO
    async with Controller(store=db) as reader:
        steps = [(t.to_status.value, t.trigger) for t in await reader.history("t-high")]
    assert steps == [
        ("queued", "orchestrator:enqueued"),
        ("starting", "scheduler:dispatch"),
        ("running", "executor:launched"),
        ("succeeded", "executor:completed"),
    ]


async def test_a_claimed_task_is_controlled_like_a_local_one(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with _worker(db) as worker, Controller(store=db, owner="client") as client:
        queued = await client.enqueue("loops", task_id="l-1")
        while (await queued.get()).status is not TaskStatus.RUNNING:
            await asyncio.sleep(0.02)
        assert worker.run_for("l-1").status is TaskStatus.RUNNING
        assert await client.stop("l-1", reason="enough") is True  # a command to the worker
        final = await queued.wait(timeout=20)
    assert final.status is TaskStatus.STOPPED
    assert final.owner == "worker-1"


async def test_a_worker_leaves_names_and_buckets_it_does_not_serve(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        other = await client.enqueue("nobody-serves-this", task_id="x")
        pinned = await client.enqueue("record", "v", task_id="v2", version=2)
        elsewhere = await client.enqueue("record", "b", task_id="b", bucket_key="tenant-A")
        mine = await client.enqueue("record", "m", task_id="m")
        async with _worker(db, owned_buckets=[0]):  # tenant-A is bucket 7 of 64
            assert (await mine.wait(timeout=20)).status is TaskStatus.SUCCEEDED
            await asyncio.sleep(0.2)  # several claim rounds
        for task in (other, pinned, elsewhere):
            snapshot = await task.get()
            assert (snapshot.status, snapshot.owner) == (TaskStatus.QUEUED, None)


async def test_arguments_that_no_longer_fit_end_the_task_failed_not_forever_queued(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "a", "surplus", task_id="bad")
        async with _worker(db):
            final = await queued.wait(timeout=20)
    assert final.status is TaskStatus.FAILED
    assert final.failure is not None
    assert final.failure.kind.value == "launch_error"
    assert "do not fit" in final.failure.message


async def test_work_needs_a_store() -> None:
    with pytest.raises(ConfigurationError, match="needs a store"):
        Controller(work=True)


async def test_closing_a_worker_gives_back_what_it_claimed_but_did_not_start(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        # One bucket, one slot per bucket: the worker claims both, can start one.
        first = await client.enqueue("loops", task_id="first", bucket_key="k", priority=1)
        second = await client.enqueue("loops", task_id="second", bucket_key="k")
        worker = _worker(db, max_parallel=4, max_parallel_per_bucket=1)
        async with worker:
            while (await first.get()).status is not TaskStatus.RUNNING:
                await asyncio.sleep(0.02)
            assert (await second.get()).owner == "worker-1"  # claimed, waiting for the bucket
            assert worker.run_for("second").status is TaskStatus.QUEUED
        stopped = await first.get()
        assert stopped.status is TaskStatus.STOPPED  # it was running: stopped by the shutdown
        back = await second.get()
        assert (back.status, back.owner) == (TaskStatus.QUEUED, None)
        assert [t.to_status for t in await client.history("second")] == [TaskStatus.QUEUED]
        async with _worker(db, owner_name="worker-2") as again:
            while (await second.get()).status is not TaskStatus.RUNNING:
                await asyncio.sleep(0.02)
            assert (await second.get()).owner == "worker-2"
            assert again.run_for("second").status is TaskStatus.RUNNING


async def sync_v1(ctx: Any, tenant: str) -> str:
    return f"v1:{tenant}"


async def sync_v2(ctx: Any, tenant: str) -> str:
    return f"v2:{tenant}"


async def test_a_version_nobody_serves_waits_visibly_until_a_worker_serves_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        old = await client.enqueue("sync", "A", task_id="old", version=1)
        new = await client.enqueue("sync", "B", task_id="new", version=2)
        v2_only = Controller(store=db, owner="w-2", work=True, poll_interval=0.05)
        v2_only.register("sync", sync_v2, version=2)
        async with v2_only:
            assert (await new.wait(timeout=20)).result == "v2:B"
            await asyncio.sleep(0.3)  # several claim rounds: @1 is left alone
            waiting = await old.get()
            assert (waiting.status, waiting.owner) == (TaskStatus.QUEUED, None)
        both = Controller(store=db, owner="w-1", work=True, poll_interval=0.05)
        both.register("sync", sync_v1, version=1)
        both.register("sync", sync_v2, version=2)
        async with both:
            final = await old.wait(timeout=20)
        assert (final.result, final.version, final.owner) == ("v1:A", 1, "w-1")


def test_versions_register_side_by_side_and_refuse_mixing() -> None:
    controller = Controller()
    controller.register("sync", sync_v1, version=1)
    controller.register("sync", sync_v2, version=2)
    assert controller.registry.versions("sync") == (1, 2)
    assert controller.registry.get("sync").fn is sync_v2  # the highest
    assert controller.registry.get("sync", 1).fn is sync_v1
    with pytest.raises(ConfigurationError, match="sync@2"):
        controller.register("sync", sync_v1, version=2)
    with pytest.raises(ConfigurationError, match="with and without a version"):
        controller.register("sync", sync_v1)
    with pytest.raises(ConfigurationError, match="version"):
        controller.register("other", sync_v1, version=-1)
    with pytest.raises(ConfigurationError, match="reads as a version"):
        controller.register("sync@3", sync_v1)  # would be taken for sync, version 3
    from chongming import UnknownTask

    with pytest.raises(UnknownTask, match="sync@3"):
        controller.registry.get("sync", 3)


async def test_reconcile_gives_back_what_a_dead_worker_claimed_but_never_started(
    tmp_path: Path,
) -> None:
    from chongming.stores.nodes import NodeInfo
    from chongming.stores.sqlite import SqliteTaskStore

    db = tmp_path / "q.db"
    async with SqliteTaskStore(db) as store, Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "r", task_id="claimed")
        dead = NodeInfo(
            owner="dead-worker", incarnation="i-1", host="h", pid=1, version="0", num_buckets=64
        )
        await store.register_node(dead, ttl_seconds=0.2)
        [claimed] = await store.claim("dead-worker", serves={"record": (None,)}, limit=1)
        assert claimed.owner == "dead-worker"
        while any(node.live for node in await store.nodes()):
            await asyncio.sleep(0.05)  # the worker "died": its lease runs out
        preview = await client.reconcile(dry_run=True)
        assert [(e.task_id, e.outcome.value) for e in preview.entries] == [("claimed", "requeued")]
        assert (await queued.get()).owner == "dead-worker"  # a dry run writes nothing
        report = await client.reconcile()
        assert [e.task_id for e in report.requeued] == ["claimed"]
        back = await queued.get()
        assert (back.status, back.owner, back.status_version) == (TaskStatus.QUEUED, None, 1)
        async with _worker(db):
            final = await queued.wait(timeout=20)
        assert (final.status, final.owner) == (TaskStatus.SUCCEEDED, "worker-1")
        steps = [t.trigger for t in await client.history("claimed")]
        assert steps[:2] == ["orchestrator:enqueued", "scheduler:dispatch"]


async def test_a_worker_reconciles_by_default_and_takes_over_a_dead_workers_claim(
    tmp_path: Path,
) -> None:
    from chongming.stores.nodes import NodeInfo
    from chongming.stores.sqlite import SqliteTaskStore

    db = tmp_path / "q.db"
    async with SqliteTaskStore(db) as store, Controller(store=db, owner="client") as client:
        queued = await client.enqueue("record", "r", task_id="orphan")
        dead = NodeInfo(
            owner="dead-worker", incarnation="i-1", host="h", pid=1, version="0", num_buckets=64
        )
        await store.register_node(dead, ttl_seconds=0.2)
        await store.claim("dead-worker", serves={"record": (None,)}, limit=1)
        worker = _worker(db, lease_ttl=0.5)  # reconciles every lease_ttl unless told otherwise
        assert worker.reconcile_interval == 0.5
        async with worker:
            final = await queued.wait(timeout=20)
        assert (final.status, final.owner) == (TaskStatus.SUCCEEDED, "worker-1")
    assert Controller(store=tmp_path / "other.db").reconcile_interval is None  # not a worker


@pytest.mark.postgres
async def test_on_postgresql_an_idle_worker_is_woken_by_the_enqueue_not_its_poll() -> None:
    from chongming.stores.postgres import PostgresTaskStore
    from tests.stores.pg_support import DSN, drop_schema, fresh_name, require_postgres

    require_postgres()
    schema = fresh_name("ntf")
    worker_store = PostgresTaskStore(DSN, schema=schema)
    client_store = PostgresTaskStore(DSN, schema=schema)
    try:
        # A poll every 60 s: only the NOTIFY of the enqueue can start the task in time.
        worker = Controller(store=worker_store, owner="w", work=True, poll_interval=60)
        worker.register("record", record)
        async with worker, Controller(store=client_store, owner="client") as client:
            await asyncio.sleep(0.5)  # the worker is idle, listening
            queued = await client.enqueue("record", "n", task_id="woken")
            async with asyncio.timeout(15):
                while (await queued.get()).status is not TaskStatus.SUCCEEDED:
                    await asyncio.sleep(0.02)
        await worker.close(close_store=True)
        await client.close(close_store=True)
    finally:
        await worker_store.close()
        await client_store.close()
        await drop_schema(schema)


async def test_a_claimed_task_the_worker_cannot_hold_goes_back_and_the_rest_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chongming.controller.host import ControllerHost
    from chongming.errors import DuplicateTask

    db = tmp_path / "q.db"
    register = ControllerHost.register

    def refuse_b(host: ControllerHost, run: Any) -> None:
        if run.task_id == "b":
            raise DuplicateTask("b")
        register(host, run)

    async with Controller(store=db, owner="client") as client:
        tasks = [await client.enqueue("record", t, task_id=t) for t in ("a", "b", "c")]
        monkeypatch.setattr(ControllerHost, "register", refuse_b)
        async with _worker(db):
            finals = [await tasks[i].wait(timeout=20) for i in (0, 2)]
            assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 2
        monkeypatch.undo()
        b = await tasks[1].get()
        assert (b.status, b.owner) == (TaskStatus.QUEUED, None)  # given back, not stranded


async def test_a_store_failure_while_adopting_gives_the_claims_back_then_they_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chongming.errors import StoreUnavailable
    from chongming.stores.sqlite import SqliteTaskStore

    db = tmp_path / "q.db"
    histories = SqliteTaskStore.histories
    failures = 0

    async def flaky(store: SqliteTaskStore, task_ids: Any) -> Any:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise StoreUnavailable("the store blinked")
        return await histories(store, task_ids)

    async with Controller(store=db, owner="client") as client:
        tasks = [await client.enqueue("record", t, task_id=t) for t in ("x", "y")]
        monkeypatch.setattr(SqliteTaskStore, "histories", flaky)
        # A per-bucket limit: claims stay queued and read the histories apart (see worker.py).
        async with _worker(db, max_parallel_per_bucket=10):
            finals = [await task.wait(timeout=20) for task in tasks]
        monkeypatch.undo()
    assert failures == 1
    assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 2
