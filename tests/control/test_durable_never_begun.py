"""A durable task whose worker died after its claim started it, before its attempt began.

Found by the store-restart proof (tests/cli/test_durable_store_restart.py): a
worker SIGKILLed right after a claim wrote ``starting`` (the claim starts what
it takes) left a durable task with no durable run yet (the run row and its
epoch come with the attempt's start). Reconcile told durable tasks by that
row, so it judged this one a plain task and ended it ``lost`` — for good,
though nothing of it had run and it was declared resumable. A worker that
registers the task knows it is durable: its reconcile resumes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from chongming import Controller, TaskStatus
from chongming.state.machine import apply_transition
from chongming.state.triggers import Trigger
from chongming.stores.sqlite import SqliteTaskStore
from tests.conftest import FAST

RAN: list[str] = []


async def _note(what: str) -> str:
    RAN.append(what)
    return what


async def one_step(ctx: Any) -> Any:
    return await ctx.step("only", _note, "ran")


async def test_a_dead_workers_started_but_never_begun_durable_task_resumes(
    tmp_path: Path,
) -> None:
    RAN.clear()
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        await client.enqueue("one_step", task_id="n-1")
    async with SqliteTaskStore(db) as planting:  # what the dead worker's claim wrote
        queued = await planting.get("n-1")
        assert queued is not None
        moved, transition = apply_transition(
            queued, TaskStatus.STARTING, trigger=Trigger.DISPATCH, at=queued.updated_at
        )
        starting = dataclasses.replace(moved, owner="dead-worker")
        await planting.save(
            starting, expect_version=queued.status_version, transitions=[transition]
        )
        assert await planting.durable_runs(["n-1"]) == {}  # no attempt ever began
    worker = Controller(
        store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST, reconcile_interval=0.1
    )
    worker.register("one_step", one_step, durable=True, max_resumes=2)
    async with worker:
        store = worker.store
        assert store is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not (await store.get("n-1")).is_terminal:  # type: ignore[union-attr]
            assert loop.time() < deadline, "not ended within 10 s"
            await asyncio.sleep(0.02)
        final = await store.get("n-1")
        history = await store.history("n-1")
    assert final is not None
    assert (final.status, final.result, final.owner) == (TaskStatus.SUCCEEDED, "ran", "w-1")
    assert RAN == ["ran"]
    lost = [(t.from_status, t.to_status) for t in history if t.trigger == Trigger.LEASE_EXPIRED]
    assert lost == [(TaskStatus.STARTING, TaskStatus.RETRY_WAIT)]  # the attempt is still lost
    resumed = [t.reason for t in history if t.trigger == Trigger.RESUMED]
    assert resumed == ["resume 1 of at most 2"]
