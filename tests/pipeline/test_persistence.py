"""Node transitions are written through like any task's; a crashed pipeline is not resumed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chongming import (
    Controller,
    DuplicateTaskId,
    SqliteTaskStore,
    TaskSnapshot,
    TaskStatus,
)
from chongming.pipeline import AggregationPolicy, JoinMode, Pipeline, PipelineStatus
from chongming.plane.reconcile import ReconcileOutcome
from chongming.policies import ControlWindows
from chongming.state import audit_history
from chongming.state.triggers import Trigger
from tests.pipeline.support import Gates, wait_until

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)


def triggers(history: list[Any]) -> list[tuple[str, str, str]]:
    return [(t.from_status.value, t.to_status.value, t.trigger) for t in history]


async def test_every_node_transition_reaches_the_store_with_its_trigger(tmp_path: Path) -> None:
    gates = Gates()
    async with (
        SqliteTaskStore(tmp_path / "p.db") as store,
        Controller(store=store, owner="etl-node", windows=FAST) as controller,
    ):
        gates.register(controller)
        pipeline = Pipeline("stored")
        fetch = pipeline.node("gated", node_id="fetch")
        bad = pipeline.node("gated", "fail", node_id="bad", depends_on=[fetch])
        busy = pipeline.node("gated", node_id="busy", depends_on=[fetch])
        pipeline.node("gated", node_id="load", depends_on=[bad, busy])
        pipeline.node("gated", node_id="audit", depends_on=[busy], join=JoinMode.ALL_SETTLED)
        run = await controller.submit_pipeline(pipeline, run_id="night")
        # Durable before submit_pipeline returned: read at once, no waiting.
        stored = await store.get("night:load")
        assert stored is not None
        assert (stored.status, stored.label, stored.owner) == (S.BLOCKED, "stored/load", "etl-node")
        assert triggers(await store.history("night:load")) == [
            ("pending", "blocked", Trigger.WAITING_FOR_DEPENDENCIES)
        ]
        gates.release("fetch")
        await wait_until(lambda: {"bad", "busy"} <= set(gates.entered))
        gates.release("bad")
        await wait_until(lambda: run.node("audit").done)
        gates.release("busy")
        outcome = await run.wait(10)
        assert outcome.status is PipelineStatus.FAILED
        for node_id, node_run in run.runs.items():
            snapshot = await store.get(node_run.task_id)
            history = await store.history(node_run.task_id)
            assert snapshot == node_run.snapshot, node_id
            assert history == list(node_run.transitions), node_id
            assert audit_history(snapshot, history) == [], node_id
        assert triggers(await store.history("night:load")) == [
            ("pending", "blocked", Trigger.WAITING_FOR_DEPENDENCIES),
            ("blocked", "skipped", Trigger.UPSTREAM_FAILED),
        ]
        assert triggers(await store.history("night:audit")) == [
            ("pending", "blocked", Trigger.WAITING_FOR_DEPENDENCIES),
            ("blocked", "cancelled", Trigger.FAIL_FAST),
        ]
        audit = (await store.history("night:audit"))[-1]
        assert audit.reason == "node 'bad' failed"
        assert triggers(await store.history("night:busy"))[:2] == [
            ("pending", "blocked", Trigger.WAITING_FOR_DEPENDENCIES),
            ("blocked", "queued", Trigger.DEPENDENCIES_RESOLVED),
        ]
        assert controller.persist_failures.ok


async def test_a_node_the_store_refuses_leaves_no_node_waiting_in_it(tmp_path: Path) -> None:
    async with (
        SqliteTaskStore(tmp_path / "p.db") as store,
        Controller(store=store, owner="a") as controller,
    ):
        gates = Gates()
        gates.register(controller)
        now = datetime.now(UTC)
        squatter = TaskSnapshot(
            task_id="p:b",
            name="other",
            label="other",
            status=S.QUEUED,
            status_version=1,
            attempt=0,
            max_attempts=1,
            created_at=now,
            updated_at=now,
        )
        await store.create(squatter)
        pipeline = Pipeline("clash")
        a = pipeline.node("gated", node_id="a")
        pipeline.node("gated", node_id="b", depends_on=[a])
        pipeline.node("gated", node_id="c", depends_on=[a])
        with pytest.raises(DuplicateTaskId):
            await controller.submit_pipeline(pipeline, run_id="p")
        assert gates.entered == []  # nothing ran
        assert (await store.get("p:b")) == squatter  # the other task is untouched
        for task_id in ("p:a", "p:c"):
            await wait_until(lambda t=task_id: controller.run_for(t).done)
            await asyncio.sleep(0)
        await wait_until(lambda: controller.persist_failures.pending_transitions == 0)
        for task_id in ("p:a", "p:c"):
            history = await store.history(task_id)
            assert history[-1].to_status is S.CANCELLED
            assert history[-1].trigger == Trigger.PIPELINE_CANCELLED
            assert "could not be stored" in (history[-1].reason or "")
        assert len(controller._pipelines) == 0


async def test_after_a_crash_the_pipeline_is_not_resumed_and_reconcile_judges_its_nodes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crash.db"
    gates = Gates()
    crashed_store = SqliteTaskStore(path)
    async with Controller(store=crashed_store, owner="dies", lease_ttl=0.5, windows=FAST) as dies:
        gates.register(dies)
        pipeline = Pipeline("half-done", aggregation=AggregationPolicy.ALL_SETTLED)
        first = pipeline.node("gated", node_id="first")
        long = pipeline.node("gated", node_id="long", depends_on=[first])
        pipeline.node("gated", node_id="after", depends_on=[long])
        await dies.submit_pipeline(pipeline, run_id="x")
        gates.release("first")
        await wait_until(lambda: "long" in gates.entered)
        async with SqliteTaskStore(path) as probe:

            async def stored(task_id: str) -> S | None:
                snapshot = await probe.get(task_id)
                return None if snapshot is None else snapshot.status

            deadline = asyncio.get_running_loop().time() + 5
            while await stored("x:long") is not S.RUNNING:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
        # The process "dies": its store goes away under it, nothing more is written
        # and its node lease is never released (it expires).
        await crashed_store.close()
        gates.release("long")
    async with SqliteTaskStore(path) as store, Controller(store=store, owner="later") as later:
        deadline = asyncio.get_running_loop().time() + 5
        while not (await later.reconcile(dry_run=True)).lost:  # until the dead lease expires
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        report = await later.reconcile()
        verdicts = {entry.task_id: entry.outcome for entry in report.entries}
        assert verdicts == {"x:long": ReconcileOutcome.LOST, "x:after": ReconcileOutcome.ADOPTABLE}
        long_node = await store.get("x:long")
        after = await store.get("x:after")
        assert long_node is not None
        assert after is not None
        assert long_node.status is S.LOST
        assert (await store.history("x:long"))[-1].trigger == Trigger.LEASE_EXPIRED
        assert after.status is S.BLOCKED  # reported, never pretended resumed
        assert (await store.get("x:first")) is not None
        assert (await later.stats()).held == 0  # nothing was picked up again
