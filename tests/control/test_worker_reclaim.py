"""A durable task that comes back to the worker whose attempt of it ended: it runs again there.

Found by the store-restart proof (tests/cli/test_durable_store_restart.py):
while the store was away, another node reconciled a worker's durable task
(its lease had expired by the store's clock) and put it back in the queue;
the worker's own attempt was fenced and let go, and its ended run stayed
among the host's finished runs. When the same worker claimed the task again,
the claim met that old run: with claims that start what they take it gave
the task back (``claimed by a worker that did not launch it``) at every
claim, forever; with plain claims it skipped it as "adopted already", and the
task stayed ``queued`` under a live owner that never ran it (no reconcile
touches a live owner's task). An ended run is history: the new claim runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskStatus
from chongming.plane.reconcile import resume_write
from chongming.state.triggers import Trigger
from tests.conftest import FAST

GATE: dict[str, asyncio.Event] = {}


async def _value(n: int) -> int:
    return n


async def two_steps(ctx: Any) -> str:
    await ctx.step("one", _value, 1)
    if ctx.attempt == 1:
        await GATE["first"].wait()  # meanwhile the store gives the task back to the queue
    await ctx.step("two", _value, 2)
    return "done"


async def _until(check: Callable[[], Any], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, "not within the bound"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(
    "limits",
    [{}, {"max_parallel_per_bucket": 10}],
    ids=["claims-that-start", "plain-claims"],
)
async def test_a_task_given_back_to_the_queue_runs_again_on_the_worker_that_ran_it(
    tmp_path: Path, limits: dict[str, Any]
) -> None:
    GATE["first"] = asyncio.Event()
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client", poll_interval=0.05) as client:
        queued = await client.enqueue("two_steps", task_id="t-1")
        worker = Controller(
            store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST, **limits
        )
        worker.register("two_steps", two_steps, durable=True, max_resumes=3)
        async with worker:
            store = worker.store
            assert store is not None

            async def first_step_recorded() -> bool:
                return [s.name for s in await store.steps("t-1")] == ["one"]

            await _until(first_step_recorded)
            # What a reconcile of another node writes for an owner it judged dead: a
            # newer epoch fences this attempt, and the task goes back to the queue.
            await store.begin_durable_attempt("t-1", "w-1", max_resumes=3)
            running = await store.get("t-1")
            assert running is not None
            assert running.status is TaskStatus.RUNNING
            moved, transitions = resume_write(
                running,
                resumes=0,
                max_resumes=3,
                at=datetime.now(UTC),
                actor="reconcile:w-2",
                reason=None,
                detail="owner 'w-1''s lease expired",
            )
            await store.save(
                moved, expect_version=running.status_version, transitions=list(transitions)
            )
            GATE["first"].set()  # the fenced attempt ends here; the worker claims the task
            final = await queued.wait(timeout=10)
            history = await store.history("t-1")
            steps = await store.steps("t-1")
    assert (final.status, final.result, final.owner) == (TaskStatus.SUCCEEDED, "done", "w-1")
    assert [s.name for s in steps] == ["one", "two"]
    assert steps[1].epoch > steps[0].epoch + 1  # recorded by a later attempt than the fenced one
    resumed = [t for t in history if t.trigger == Trigger.RESUMED]
    assert len(resumed) == 1
    # No claim of it gave it back more than a bounded few times (the fenced run ending).
    give_backs = [t for t in history if t.reason == "claimed by a worker that did not launch it"]
    assert len(give_backs) <= 3, len(give_backs)


async def _record(ctx: Any, value: str) -> str:
    return value


async def test_a_claim_given_back_while_the_store_blinks_is_not_stranded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A started claim the worker cannot hold goes back to the queue once the store answers.

    Before, the give-back's failed write left the task ``starting`` under the
    live worker, where no reconcile takes it over: stranded while it lives.
    """
    from chongming.controller.host import ControllerHost
    from chongming.errors import DuplicateTask, StoreUnavailable
    from chongming.stores.sqlite import SqliteTaskStore

    db = tmp_path / "q.db"
    register = ControllerHost.register
    save = SqliteTaskStore.save
    refused: list[str] = []

    def refuse_b(host: ControllerHost, run: Any) -> None:
        if run.task_id == "b":
            refused.append("b")
            raise DuplicateTask("b")
        register(host, run)

    blinked: list[str] = []

    async def blinking(store: SqliteTaskStore, snapshot: Any, **options: Any) -> Any:
        giving_back = any(
            t.reason == "claimed by a worker that did not launch it"
            for t in options.get("transitions", ())
        )
        if giving_back and len(refused) == 1 and len(blinked) < 2:
            blinked.append(snapshot.task_id)
            raise StoreUnavailable("the store blinked")
        return await save(store, snapshot, **options)

    async with Controller(store=db, owner="client", poll_interval=0.05) as client:
        tasks = [await client.enqueue("record", t, task_id=t) for t in ("a", "b")]
        monkeypatch.setattr(ControllerHost, "register", refuse_b)
        monkeypatch.setattr(SqliteTaskStore, "save", blinking)
        worker = Controller(store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST)
        worker.register("record", _record)
        async with worker:
            assert (await tasks[0].wait(timeout=10)).status is TaskStatus.SUCCEEDED

            async def given_back() -> bool:
                b = await tasks[1].get()
                return len(blinked) == 2 and b.status is TaskStatus.QUEUED

            await _until(given_back)
            monkeypatch.undo()  # the worker may hold it now: it runs
            final = await tasks[1].wait(timeout=10)
    assert blinked == ["b", "b"]  # its give-back met the store away twice, then went through
    assert (final.status, final.owner) == (TaskStatus.SUCCEEDED, "w-1")
    # The start it gave back was no attempt: the one that ran is attempt 1 (issue 22, case 9).
    assert final.attempt == 1
