"""A controller with a store: every transition written through, read back by others."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chongming import (
    Controller,
    DuplicateTaskId,
    InMemoryTaskStore,
    SqliteTaskStore,
    TaskNotFound,
    TaskStatus,
    TaskStore,
)
from chongming.policies import ControlWindows
from chongming.state import audit_history
from chongming.state.triggers import Trigger
from tests.support import wait_for

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=1.0)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    made: TaskStore = (
        InMemoryTaskStore() if request.param == "memory" else SqliteTaskStore(tmp_path / "t.db")
    )
    async with made:
        yield made


async def echo(ctx: Any, value: Any) -> Any:
    await ctx.checkpoint()
    return value


async def loops(ctx: Any) -> None:
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.005)


async def test_every_transition_reaches_the_store(store: TaskStore) -> None:
    async with Controller(store=store, owner="a") as controller:
        controller.register("echo", echo)
        runs = [await controller.submit("echo", i, task_id=f"t{i}") for i in range(20)]
        outcomes = await controller.wait_all(10)
        assert all(o.ok for o in outcomes)
        for run in runs:
            stored = await store.get(run.task_id)
            assert stored is not None
            assert stored.status is S.SUCCEEDED  # durable before the outcome was handed out
            history = await store.history(run.task_id)
            assert history == list(run.transitions)
            assert audit_history(stored, history) == []
            assert stored.owner == "a"
            assert stored.result == run.snapshot.result
        assert controller.persist_failures.ok


async def test_submit_returns_once_the_task_is_durable(store: TaskStore) -> None:
    async with Controller(store=store, owner="a", max_parallel=1) as controller:
        controller.register("loops", loops)
        first = await controller.submit("loops", task_id="first")
        second = await controller.submit("loops", task_id="second")
        stored = await store.get("second")  # read at once: no waiting
        assert stored is not None
        assert stored.status is S.QUEUED
        assert [t.to_status for t in await store.history("second")] == [S.QUEUED]
        await first.stop()
        await second.stop()
        await controller.wait_all(5)


async def test_a_task_id_held_by_another_process_is_refused_and_nothing_written(
    store: TaskStore,
) -> None:
    async with Controller(store=store, owner="a") as a, Controller(store=store, owner="b") as b:
        a.register("echo", echo)
        b.register("echo", echo)
        run = await a.submit("echo", 1, task_id="same")
        await run.wait(5)
        with pytest.raises(DuplicateTaskId):
            await b.submit("echo", 2, task_id="same")
        assert (await b.stats()).held == 0
        stored = await store.get("same")
        assert stored is not None
        assert (stored.owner, stored.args) == ("a", (1,))


async def test_reads_show_other_processes_tasks(store: TaskStore) -> None:
    async with Controller(store=store, owner="a") as a:
        a.register("echo", echo)
        await (await a.submit("echo", "x", task_id="from-a")).wait(5)
        async with Controller(store=store, owner="reader") as reader:
            snapshot = await reader.get("from-a")
            assert (snapshot.status, snapshot.owner) == (S.SUCCEEDED, "a")
            assert await reader.history("from-a") == await a.history("from-a")
            assert [s.task_id for s in await reader.list_tasks()] == ["from-a"]
            with pytest.raises(TaskNotFound):
                await reader.get("nobody")
            assert not reader._plane.commands.running  # type: ignore[union-attr]


async def test_stop_pause_resume_of_a_task_held_elsewhere_travel_as_commands(
    store: TaskStore,
) -> None:
    async with (
        Controller(store=store, owner="a", windows=FAST, poll_interval=0.05) as a,
        Controller(store=store, owner="b", poll_interval=0.05) as b,
    ):
        a.register("loops", loops)
        run = await a.submit("loops", task_id="job")
        await wait_for(lambda: run.status is S.RUNNING)
        assert await b.pause("job") is False  # unconfirmed across processes
        await wait_for(lambda: run.status is S.PAUSED)
        assert await b.resume("job") is False
        await wait_for(lambda: run.status is S.RUNNING)
        assert await b.stop("job", reason="from b") is True
        outcome = await run.wait(5)
        assert outcome.status is S.STOPPED
        history = await b.history("job")
        stopping = [t for t in history if t.to_status is S.STOPPING]
        assert [(t.trigger, t.reason) for t in stopping] == [(Trigger.USER_STOP, "from b")]
        assert history[-1].trigger == Trigger.STOP_CONFIRMED
        assert await b.stop("job") is False  # already terminal: no command
        with pytest.raises(TaskNotFound):
            await b.stop("nobody")


async def test_a_location_string_opens_a_store_that_closes_with_the_controller(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.db"
    async with Controller(store=f"sqlite:///{path}") as controller:
        controller.register("echo", echo)
        await (await controller.submit("echo", 1, task_id="k")).wait(5)
        store = controller.store
    assert store is not None
    async with SqliteTaskStore(path) as again:
        stored = await again.get("k")
        assert stored is not None
        assert stored.status is S.SUCCEEDED
    from chongming.errors import StoreClosed

    with pytest.raises(StoreClosed):
        await store.get("k")


async def test_progress_and_heartbeats_reach_the_store_without_a_version(
    store: TaskStore,
) -> None:
    go = asyncio.Event()

    async def reports(ctx: Any) -> None:
        for i in range(1, 1001):
            ctx.progress(i, total=1000, message=f"row {i}")
        await ctx.checkpoint()
        await go.wait()

    async with Controller(store=store, owner="a", poll_interval=0.05) as controller:
        controller.register("reports", reports)
        run = await controller.submit("reports", task_id="p")
        await wait_for(lambda: run.status is S.RUNNING)
        version = run.status_version

        async def stored_progress() -> float | None:
            snapshot = await store.get("p")
            assert snapshot is not None
            return None if snapshot.progress is None else snapshot.progress.done

        deadline = asyncio.get_running_loop().time() + 5
        while await stored_progress() != 1000:
            assert asyncio.get_running_loop().time() < deadline, "progress never written"
            await asyncio.sleep(0.01)
        stored = await store.get("p")
        assert stored is not None
        assert stored.status_version == version  # touch never bumps the version
        assert stored.last_heartbeat_at is not None
        assert stored.progress is not None
        assert stored.progress.message == "row 1000"
        go.set()
        assert (await run.wait(5)).ok


async def test_close_writes_every_pending_transition(store: TaskStore) -> None:
    controller = Controller(store=store, owner="a", max_parallel=50)
    async with controller:
        controller.register("echo", echo)
        runs = [await controller.submit("echo", i) for i in range(200)]
    # No wait: close itself must leave the store holding every transition.
    for run in runs:
        assert await store.history(run.task_id) == list(run.transitions)
        stored = await store.get(run.task_id)
        assert stored is not None
        assert stored.status_version == run.status_version
    assert controller.persist_failures.pending_transitions == 0


class LosesOneReply(InMemoryTaskStore):
    """Commits a batch but answers FAILED (a reply lost after the commit), once armed."""

    armed = False

    async def apply_writes(self, writes: Any) -> Any:
        from chongming.errors import StoreUnavailable
        from chongming.stores.writes import WriteOutcome, WriteResult

        results = await super().apply_writes(writes)
        if self.armed:
            self.armed = False
            error = StoreUnavailable("connection lost after the commit")
            return [WriteResult(outcome=WriteOutcome.FAILED, error=error) for _ in results]
        return results


async def test_a_committed_write_whose_reply_was_lost_is_not_a_conflict() -> None:
    store = LosesOneReply()
    go = asyncio.Event()

    async def steps(ctx: Any) -> str:
        while not go.is_set():
            await ctx.checkpoint()
            await asyncio.sleep(0.001)
        return "ok"

    async with store, Controller(store=store, owner="a", windows=FAST) as controller:
        controller.register("steps", steps)
        run = await controller.submit("steps", task_id="t")
        await wait_for(lambda: run.status is S.RUNNING)
        await wait_for(lambda: controller.persist_failures.pending_transitions == 0)
        store.armed = True  # the pause's write commits; its reply is lost
        assert await run.pause()
        assert await run.resume()  # the run moves on before the write is retried
        go.set()
        outcome = await run.wait(10)
        assert outcome.ok
        await wait_for(lambda: controller.persist_failures.pending_transitions == 0)
        assert controller.persist_failures.failed_writes == 1
        assert controller.persist_failures.let_go == ()  # it was ours: no conflict
        assert await store.history("t") == list(run.transitions)


async def test_a_store_closed_under_a_running_controller_is_recorded_not_fatal() -> None:
    go = asyncio.Event()

    async def waits_for_go(ctx: Any) -> str:
        await go.wait()
        return "finished anyway"

    store = InMemoryTaskStore()
    async with Controller(store=store, owner="a") as controller:
        controller.register("w", waits_for_go)
        run = await controller.submit("w", task_id="t")
        await wait_for(lambda: run.status is S.RUNNING)
        await store.close()  # someone closes the store under us
        go.set()
        outcome = await asyncio.wait_for(run.wait(), 10)  # handed out: the store is gone
        assert outcome.ok  # the task itself was fine
        await wait_for(lambda: controller.persist_failures.last_error is not None)
        failures = controller.persist_failures
        assert "closed" in (failures.last_error or "")
        assert failures.pending_transitions > 0  # and they are not pretended written
    # close() returned: nothing hung on the dead store


async def test_a_store_whose_schema_is_newer_than_the_code_fails_at_start(
    tmp_path: Path,
) -> None:
    import sqlite3

    from chongming import SchemaError

    path = tmp_path / "newer.db"
    async with SqliteTaskStore(path) as store:
        await store.get("nothing")  # migrate to today's schema
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (999, 'from the future', 0)")
    conn.commit()
    conn.close()
    controller = Controller(store=str(path), owner="a")
    with pytest.raises(SchemaError):
        await controller.start()
    await controller.close()


async def test_a_cancelled_submit_settles_its_creation_first(store: TaskStore) -> None:
    async with Controller(store=store, owner="a") as controller:
        controller.register("echo", echo)
        await (await controller.submit("echo", 0)).wait(5)  # this node is registered now
        pending = asyncio.ensure_future(controller.submit("echo", 1, task_id="c"))
        await asyncio.sleep(0)  # the submit is now waiting for its creation
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        # The creation committed, so the task was accepted and runs: nothing half-done.
        await wait_for(lambda: controller._host.get("c") is not None)
        outcome = await controller.run_for("c").wait(5)
        assert outcome.ok
        stored = await store.get("c")
        assert stored is not None
        assert stored.status is S.SUCCEEDED
