"""Running pipelines: the trajectory of a node, each join mode, fail-fast, stop, data, close."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskStatus
from chongming.errors import ConfigurationError, PayloadError, UnknownNode
from chongming.pipeline import (
    AggregationPolicy,
    JoinMode,
    NodeSnapshot,
    Pipeline,
    PipelineStatus,
)
from chongming.policies import ControlWindows
from chongming.state.triggers import Trigger
from tests.pipeline.support import Gates, echo, path, statuses, wait_until
from tests.support import assert_sound

S = TaskStatus
SETTLED = AggregationPolicy.ALL_SETTLED


@pytest.fixture
def gates() -> Gates:
    return Gates()


async def running(controller: Controller, gates: Gates, *node_ids: str) -> None:
    await wait_until(lambda: all(node_id in gates.entered for node_id in node_ids))


async def test_a_node_goes_pending_blocked_queued_and_its_id_names_the_run(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("two")
        pipeline.node("gated", node_id="a")
        pipeline.node("gated", node_id="b", depends_on=["a"])
        run = await controller.submit_pipeline(pipeline, run_id="r7")
        a, b = run.node("a"), run.node("b")
        assert (a.task_id, b.task_id) == ("r7:a", "r7:b")
        assert b.snapshot.label == "two/b"
        assert b.status is S.BLOCKED
        assert run.status is PipelineStatus.RUNNING
        gates.release("a", "b")
        outcome = await run.wait(5)
        assert outcome.status is PipelineStatus.SUCCEEDED
        assert outcome.ok
        assert path(a)[0] == ("pending", "queued", Trigger.DEPENDENCIES_RESOLVED)
        assert path(b)[:3] == [
            ("pending", "blocked", Trigger.WAITING_FOR_DEPENDENCIES),
            ("blocked", "queued", Trigger.DEPENDENCIES_RESOLVED),
            ("queued", "starting", Trigger.DISPATCH),
        ]
        assert path(b)[-1] == ("running", "succeeded", Trigger.COMPLETED)
        for node_run in (a, b):
            assert_sound(node_run)
        assert await controller.get("r7:b") == b.snapshot  # an ordinary task of the controller


async def test_blocked_nodes_hold_no_slot_and_are_not_queued(gates: Gates) -> None:
    async with Controller(max_parallel=2) as controller:
        gates.register(controller)
        controller.register("echo", echo)
        pipeline = Pipeline("wide")
        root = pipeline.node("gated", node_id="root")
        for index in range(30):
            pipeline.node("gated", node_id=f"n{index}", depends_on=[root])
        run = await controller.submit_pipeline(pipeline)
        await running(controller, gates, "root")
        stats = await controller.stats()
        assert (stats.queued, stats.holding_slot) == (0, 1)
        assert stats.by_status == {"running": 1, "blocked": 30}
        blocked = [r for r in run.runs.values() if r.status is S.BLOCKED]
        assert len(blocked) == 30
        assert not any(r.holds_slot for r in blocked)
        # A plain task gets the free slot at once: the long pipeline locks nothing.
        plain = await controller.submit("echo", "plain")
        assert (await plain.wait(5)).value == "plain"
        gates.release("root")
        await wait_until(lambda: len(gates.entered) == 3)  # root, then two at a time
        stats = await controller.stats()
        assert (stats.queued, stats.holding_slot) == (28, 2)
        gates.release(*(f"n{index}" for index in range(30)))
        assert (await run.wait(10)).ok


async def test_all_succeeded_is_a_barrier_and_passes_every_result(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("barrier")
        ups = [pipeline.node("gated", node_id=f"u{i}") for i in range(3)]
        pipeline.node("gated", node_id="join", depends_on=ups)
        run = await controller.submit_pipeline(pipeline)
        await running(controller, gates, "u0", "u1", "u2")
        gates.release("u0", "u1")
        await wait_until(lambda: run.node("u1").done)
        assert run.node("join").status is S.BLOCKED  # still waiting for u2
        gates.release("u2", "join")
        assert (await run.wait(5)).ok
        assert gates.upstream["join"] == {"u0": "u0", "u1": "u1", "u2": "u2"}
        assert gates.upstream["u0"] == {}


async def test_all_succeeded_skips_as_soon_as_one_upstream_fails(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("skip", aggregation=SETTLED)
        bad = pipeline.node("gated", "fail", node_id="bad")
        slow = pipeline.node("gated", node_id="slow")
        join = pipeline.node("gated", node_id="join", depends_on=[bad, slow])
        after = pipeline.node("gated", node_id="after", depends_on=[join])
        pipeline.node("gated", node_id="audit", depends_on=[after], join=JoinMode.ALL_SETTLED)
        run = await controller.submit_pipeline(pipeline)
        await running(controller, gates, "bad", "slow")
        gates.release("bad")
        await wait_until(lambda: run.node("join").done)
        assert run.node("slow").status is S.RUNNING  # the skip did not wait for it
        for node_id, reason in (
            ("join", "upstream 'bad' failed"),
            ("after", "upstream 'join' skipped"),
        ):
            last = run.node(node_id).last_transition
            assert (last.from_status, last.to_status) == (S.BLOCKED, S.SKIPPED)
            assert (last.trigger, last.reason) == (Trigger.UPSTREAM_FAILED, reason)
        await running(controller, gates, "audit")  # all settled: it runs
        gates.release("slow", "audit")
        outcome = await run.wait(5)
        assert outcome.status is PipelineStatus.FAILED
        assert outcome.first_failure == "bad"
        assert statuses(run) == {
            "bad": "failed",
            "slow": "succeeded",
            "join": "skipped",
            "after": "skipped",
            "audit": "succeeded",
        }
        assert gates.upstream["audit"] == {}  # a skipped upstream is absent, never None


async def test_all_settled_runs_whatever_the_upstreams_did(gates: Gates) -> None:
    seen: dict[str, Any] = {}

    async def audit(ctx: Any) -> None:
        seen.update(ctx.upstream)
        seen["bad?"] = ctx.input("bad", "absent")

    async with Controller() as controller:
        gates.register(controller)
        controller.register("audit", audit)
        pipeline = Pipeline("settled", aggregation=SETTLED)
        bad = pipeline.node("gated", "fail", node_id="bad")
        good = pipeline.node("gated", node_id="good")
        pipeline.node("audit", depends_on=[bad, good], join=JoinMode.ALL_SETTLED)
        run = await controller.submit_pipeline(pipeline)
        gates.release("bad")
        await wait_until(lambda: run.node("bad").done)
        assert run.node("audit").status is S.BLOCKED  # good has not settled yet
        gates.release("good")
        outcome = await run.wait(5)
        assert outcome.nodes["audit"].status is S.SUCCEEDED
        assert seen == {"good": "good", "bad?": "absent"}


async def test_any_succeeded_runs_on_the_first_success_or_is_skipped(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("any", aggregation=SETTLED)
        mirrors = [pipeline.node("gated", node_id=f"m{i}") for i in range(2)]
        pipeline.node("gated", node_id="use", depends_on=mirrors, join=JoinMode.ANY_SUCCEEDED)
        broken = [pipeline.node("gated", "fail", node_id=f"x{i}") for i in range(2)]
        pipeline.node("gated", node_id="never", depends_on=broken, join="any_succeeded")
        run = await controller.submit_pipeline(pipeline)
        gates.release("m1", "x0", "x1")
        await running(controller, gates, "use")
        assert run.node("m0").status is S.RUNNING  # released before m0 settled
        assert gates.upstream["use"] == {"m1": "m1"}
        never = run.node("never")
        assert never.status is S.SKIPPED
        assert never.last_transition.reason == (
            "upstream 'x1' failed: none of the 2 upstreams succeeded"
        )
        gates.release("m0", "use")
        outcome = await run.wait(5)
        assert outcome.status is PipelineStatus.FAILED
        assert "never" not in gates.entered


async def test_fail_fast_cancels_every_node_not_started_and_lets_started_ones_end(
    gates: Gates,
) -> None:
    retry = RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(base=30.0))
    attempts = 0

    async def flaky(ctx: Any) -> None:
        nonlocal attempts
        attempts += 1
        raise OSError("try again later")

    async with Controller(max_parallel=3) as controller:
        gates.register(controller)
        controller.register("flaky", flaky, retry=retry)
        pipeline = Pipeline("fast")
        root = pipeline.node("gated", node_id="root")
        bad = pipeline.node("gated", "fail", node_id="bad", depends_on=[root])
        busy = pipeline.node("gated", node_id="busy", depends_on=[root])
        pipeline.node("flaky", node_id="flaky", depends_on=[root])  # retry_wait: no slot
        pipeline.node("gated", node_id="taken", depends_on=[root])  # takes flaky's slot
        pipeline.node("gated", node_id="waiting", depends_on=[root])  # queued: no slot left
        pipeline.node("gated", node_id="after", depends_on=[busy])
        pipeline.node("gated", node_id="skipped", depends_on=[bad])
        run = await controller.submit_pipeline(pipeline)
        gates.release("root")
        await wait_until(lambda: run.node("flaky").status is S.RETRY_WAIT)
        await running(controller, gates, "bad", "busy", "taken")
        assert run.node("waiting").status is S.QUEUED
        gates.release("bad")
        await wait_until(lambda: run.node("after").done)
        ends = statuses(run)
        assert ends["busy"] == "running"  # started: never cancelled, never stopped
        assert {k: ends[k] for k in ("flaky", "waiting", "after", "skipped")} == {
            "flaky": "cancelled",
            "waiting": "cancelled",
            "after": "cancelled",
            "skipped": "skipped",  # it could never have run: its upstream failed
        }
        for node_id in ("flaky", "waiting", "after"):
            last = run.node(node_id).last_transition
            assert (last.trigger, last.reason) == (Trigger.FAIL_FAST, "node 'bad' failed")
        assert (await controller.stats()).queued == 0  # the cancelled one left admission
        gates.release("busy", "taken")
        outcome = await run.wait(5)
        assert outcome.status is PipelineStatus.FAILED
        assert outcome.first_failure == "bad"
        assert statuses(run)["busy"] == "succeeded"
        assert attempts == 1
        assert "waiting" not in gates.entered


async def test_a_node_stopped_by_hand_triggers_no_fail_fast(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("by-hand")
        a = pipeline.node("gated", node_id="a")
        b = pipeline.node("gated", node_id="b")
        pipeline.node("gated", node_id="after-a", depends_on=[a])
        pipeline.node("gated", node_id="after-b", depends_on=[b])
        run = await controller.submit_pipeline(pipeline)
        await running(controller, gates, "a", "b")
        assert await controller.stop(run.node("a").task_id, reason="not today")
        gates.release("a", "b", "after-b")
        outcome = await run.wait(5)
        assert statuses(run) == {
            "a": "stopped",
            "b": "succeeded",
            "after-a": "skipped",
            "after-b": "succeeded",
        }
        assert outcome.status is PipelineStatus.CANCELLED  # a person called part of it off
        assert outcome.first_failure is None


async def test_stop_stops_running_nodes_cancels_the_rest_and_ends_cancelled(
    gates: Gates,
) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("stop")
        a = pipeline.node("gated", node_id="a")
        b = pipeline.node("gated", node_id="b", depends_on=[a])
        pipeline.node("gated", node_id="c", depends_on=[b], join=JoinMode.ALL_SETTLED)
        run = await controller.submit_pipeline(pipeline)
        await running(controller, gates, "a")
        waiter = asyncio.create_task(run.wait(5))
        with pytest.raises(PayloadError):
            await run.stop(actor="")
        assert await run.stop("wrong day", actor="alice")
        assert not await run.stop("again")
        assert statuses(run) == {"a": "stopping", "b": "cancelled", "c": "cancelled"}
        gates.release("a")
        outcome = await waiter
        assert outcome.status is PipelineStatus.CANCELLED
        assert statuses(run) == {"a": "stopped", "b": "cancelled", "c": "cancelled"}
        stop = run.node("a").transitions[-2]
        assert (stop.to_status, stop.trigger, stop.actor, stop.reason) == (
            S.STOPPING,
            Trigger.USER_STOP,
            "alice",
            "wrong day",
        )
        cancel = run.node("c").last_transition
        assert (cancel.trigger, cancel.actor, cancel.reason) == (
            Trigger.PIPELINE_CANCELLED,
            "alice",
            "the pipeline was stopped: wrong day",
        )
        assert not await run.stop()  # over: nothing to do


async def test_a_stop_after_a_failure_keeps_the_outcome_failed(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("fail-then-stop")
        pipeline.node("gated", "fail", node_id="bad")
        pipeline.node("gated", node_id="long")
        run = await controller.submit_pipeline(pipeline)
        await running(controller, gates, "bad", "long")
        gates.release("bad")
        await wait_until(lambda: run.node("bad").done)
        assert await run.stop()
        gates.release("long")
        outcome = await run.wait(5)
        assert statuses(run) == {"bad": "failed", "long": "stopped"}
        assert outcome.status is PipelineStatus.FAILED


async def test_each_downstream_gets_its_own_copy_of_an_upstream_result() -> None:
    seen: dict[str, Any] = {}

    async def produce(ctx: Any) -> dict[str, list[int]]:
        return {"rows": [1, 2, 3]}

    async def mutate(ctx: Any) -> int:
        rows = ctx.input("produce")["rows"]
        rows.append(99)
        seen[ctx.task_id] = rows
        return len(rows)

    async with Controller() as controller:
        controller.register("produce", produce)
        controller.register("mutate", mutate)
        pipeline = Pipeline("copies")
        source = pipeline.node("produce")
        for index in range(3):
            pipeline.node("mutate", node_id=f"m{index}", depends_on=[source])
        run = await controller.submit_pipeline(pipeline, run_id="c")
        outcome = await run.wait(5)
        assert [outcome.value(f"m{i}") for i in range(3)] == [4, 4, 4]
        assert outcome.value("produce") == {"rows": [1, 2, 3]}
        with pytest.raises(TypeError):
            run.runs["x"] = run.node("m0")  # type: ignore[index]  # read-only


async def test_wait_with_a_timeout_changes_nothing(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("slow")
        pipeline.node("gated", node_id="a")
        run = await controller.submit_pipeline(pipeline)
        with pytest.raises(TimeoutError):
            await run.wait(timeout=0.05)
        with pytest.raises(ConfigurationError):
            await run.wait(timeout=-1)
        assert run.outcome is None
        gates.release("a")
        assert (await run.wait(5)).ok


async def test_snapshot_and_node_access(gates: Gates) -> None:
    async with Controller() as controller:
        gates.register(controller)
        pipeline = Pipeline("read")
        a = pipeline.node("gated", node_id="a")
        pipeline.node("gated", node_id="b", depends_on=[a], join=JoinMode.ALL_SETTLED)
        run = await controller.submit_pipeline(pipeline, run_id="r")
        snapshot = run.snapshot()
        assert (snapshot.run_id, snapshot.name, snapshot.status) == ("r", "read", "running")
        assert snapshot.aggregation is AggregationPolicy.FAIL_FAST
        assert snapshot.node("b") == NodeSnapshot(
            node_id="b",
            task_id="r:b",
            name="gated",
            status=S.BLOCKED,
            depends_on=("a",),
            join=JoinMode.ALL_SETTLED,
            trigger=Trigger.WAITING_FOR_DEPENDENCIES,
            reason=None,
        )
        assert snapshot.node("zzz") is None
        assert list(run.runs) == ["a", "b"]
        with pytest.raises(UnknownNode) as caught:
            run.node("zzz")
        assert isinstance(caught.value, LookupError)
        assert repr(run) == "<PipelineRun 'r' 'read' running nodes=2>"
        gates.release("a", "b")
        await run.wait(5)
        assert run.snapshot().status is PipelineStatus.SUCCEEDED


async def test_one_pipeline_is_a_recipe_that_runs_many_times() -> None:
    async with Controller() as controller:
        controller.register("echo", echo)
        pipeline = Pipeline("recipe")
        first = pipeline.node("echo", 1, node_id="first")
        pipeline.node("echo", 2, node_id="second", depends_on=[first])
        runs = [await controller.submit_pipeline(pipeline) for _ in range(3)]
        assert len({run.run_id for run in runs}) == 3
        for run in runs:
            assert (await run.wait(5)).value("second") == 2


async def test_closing_the_controller_mid_pipeline_leaves_nothing_running(
    gates: Gates, fast_windows: ControlWindows
) -> None:
    controller = Controller(windows=fast_windows)
    gates.register(controller)
    pipeline = Pipeline("closing")
    root = pipeline.node("gated", node_id="root")
    pipeline.node("gated", node_id="child", depends_on=[root])
    run = await controller.submit_pipeline(pipeline)
    await running(controller, gates, "root")
    waiter = asyncio.create_task(run.wait())
    await controller.close()
    outcome = await asyncio.wait_for(waiter, 5)
    assert outcome.status is PipelineStatus.CANCELLED
    assert statuses(run) == {"root": "stopped", "child": "cancelled"}
    assert path(run.node("root"))[-2][2] == Trigger.SHUTDOWN
    last = run.node("child").last_transition
    assert (last.trigger, last.reason) == (Trigger.PIPELINE_CANCELLED, "the controller is closing")
    assert len(controller._pipelines) == 0
    # The autouse leak check fails this test if any task of the pipeline outlived close().


async def test_a_stop_from_inside_a_done_callback_is_applied_after_the_current_event(
    gates: Gates, fast_windows: ControlWindows
) -> None:
    async with Controller(windows=fast_windows) as controller:
        gates.register(controller)
        pipeline = Pipeline("reentrant", aggregation=SETTLED)
        bad = pipeline.node("gated", "fail", node_id="bad")
        pipeline.node("gated", node_id="long")
        skipped = pipeline.node("gated", node_id="skipped", depends_on=[bad])
        pipeline.node("gated", node_id="later", depends_on=[skipped], join=JoinMode.ALL_SETTLED)
        pipeline.node("gated", node_id="blocked", depends_on=["long"])
        run = await controller.submit_pipeline(pipeline)
        # Called while the pipeline is deciding (the skip of "skipped" is one of its steps).
        run.node("skipped").add_done_callback(lambda _: run.shutdown("called off from a callback"))
        await running(controller, gates, "bad", "long")
        gates.release("bad")
        await wait_until(lambda: run.node("blocked").done)
        assert statuses(run) == {
            "bad": "failed",
            "long": "stopping",
            "skipped": "skipped",
            "later": "cancelled",  # its join held only after the stop: never released
            "blocked": "cancelled",
        }
        assert run.node("later").last_transition.reason == "called off from a callback"
        gates.release("long")
        outcome = await run.wait(5)
        assert outcome.status is PipelineStatus.FAILED  # the failure came before the stop
        assert statuses(run)["long"] == "stopped"
