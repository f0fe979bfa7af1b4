"""Stored pipelines (controller.enqueue_pipeline) on SQLite and PostgreSQL.

The same graphs run in process (``submit_pipeline``) and on the shared
plane must end each node the same way; a node reads its upstream results
through ``ctx.upstream``; a coordinator handed back mid-graph resumes on
another worker without running a node twice; bad input writes nothing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chongming import (
    ConfigurationError,
    Controller,
    PayloadError,
    PipelineCycle,
    TaskContext,
    TaskStatus,
    UnknownTask,
)
from chongming.controller.stored_pipelines import PIPELINE_TASK
from chongming.pipeline import AggregationPolicy, JoinMode, Pipeline
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]  # fixtures

ran: Counter[str] = Counter()
MAKER: list[StoreMaker] = []


@pytest.fixture(autouse=True)
def _maker(stores: StoreMaker) -> None:
    MAKER[:] = [stores]
    ran.clear()


async def fetch(ctx: TaskContext, day: str) -> list[int]:
    ran["fetch"] += 1
    return [1, 2, 3]


async def transform(ctx: TaskContext, shard: int, *, fail: bool = False) -> int:
    ran[f"transform {shard}"] += 1
    if fail:
        raise ValueError(f"shard {shard} broke")
    return sum(ctx.input("fetch", [])) * shard


async def gated(ctx: TaskContext, shard: int) -> int:
    """A shard that parks until the test sends it ``go``."""
    await ctx.wait_for_fact("go", timeout=60)
    ran[f"gated {shard}"] += 1
    return sum(ctx.input("fetch", [])) + shard


async def load(ctx: TaskContext) -> list[list[Any]]:
    ran["load"] += 1
    return sorted([key, value] for key, value in ctx.upstream.items())


async def audit(ctx: TaskContext) -> list[str]:
    ran["audit"] += 1
    return sorted(ctx.upstream)


def _register(controller: Controller) -> None:
    controller.register("fetch", fetch)
    controller.register("transform", transform)
    controller.register("gated", gated, durable=True)
    controller.register("load", load)
    controller.register("audit", audit)


def etl(
    aggregation: AggregationPolicy = AggregationPolicy.FAIL_FAST,
    failing: int | None = None,
    shard_task: str = "transform",
) -> Pipeline:
    pipeline = Pipeline("etl", aggregation=aggregation)
    fetched = pipeline.node("fetch", "2026-12-03", node_id="fetch")
    shards = []
    for shard in range(3):
        extra: dict[str, Any] = {"fail": True} if shard == failing else {}
        shards.append(
            pipeline.node(shard_task, shard, node_id=f"s{shard}", depends_on=[fetched], **extra)
        )
    loaded = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[loaded], join=JoinMode.ALL_SETTLED)
    return pipeline


def _worker(where: object, owner: str = "w-1", slots: int = 2) -> Controller:
    worker = Controller(
        store=MAKER[0].make(where), owner=owner, work=True, max_parallel=slots,
        poll_interval=0.05, park_threshold=0.0,
    )  # fmt: skip
    _register(worker)
    return worker


def _client(where: object) -> Controller:
    return MAKER[0].client(where, _register)


def _register_plain(controller: Controller) -> None:
    """The non-durable tasks: what a controller without a store can register."""
    for name, fn in (("fetch", fetch), ("transform", transform), ("load", load)):
        controller.register(name, fn)
    controller.register("audit", audit)


async def _in_process(pipeline: Pipeline) -> dict[str, str]:
    async with Controller(max_parallel=2) as controller:
        _register_plain(controller)
        run = await controller.submit_pipeline(pipeline)
        outcome = await run.wait(timeout=30)
    return {node: ended.status.value for node, ended in outcome.nodes.items()}


async def _stored_ends(client: Controller, run_id: str, node_ids: list[str]) -> dict[str, str]:
    """Each node's end as the coordinator's failure or result tells it."""
    final = await client.get(run_id)
    if final.status is TaskStatus.SUCCEEDED:
        return {node: str(end["status"]) for node, end in final.result["nodes"].items()}
    assert final.failure is not None
    told = final.failure.message.rsplit("(", 1)[1].rstrip(")")
    ends = dict(part.split(" ") for part in told.split(", "))
    assert sorted(ends) == sorted(node_ids)
    return ends


@pytest.mark.parametrize(
    ("aggregation", "failing"),
    [
        (AggregationPolicy.FAIL_FAST, None),
        (AggregationPolicy.FAIL_FAST, 1),
        (AggregationPolicy.ALL_SETTLED, 1),
    ],
)
async def test_a_stored_pipeline_ends_every_node_as_the_in_process_one_does(
    where: object, aggregation: AggregationPolicy, failing: int | None
) -> None:
    expected = await _in_process(etl(aggregation, failing))
    ran.clear()
    async with _client(where) as client:
        queued = await client.enqueue_pipeline(etl(aggregation, failing), run_id="nightly")
        assert queued.task_id == "nightly"
        async with _worker(where):
            final = await queued.wait(timeout=60)
        assert final.name == PIPELINE_TASK
        ends = await _stored_ends(client, "nightly", list(expected))
        assert ends == expected
        assert final.status is (TaskStatus.SUCCEEDED if failing is None else TaskStatus.FAILED)
        # A node that never runs is never enqueued; each that ran is a child, once.
        children = await client.list_tasks()
        enqueued = {t.task_id for t in children if t.task_id.startswith("nightly:")}
        never_run = ("skipped", "cancelled")
        assert enqueued == {f"nightly:{n}" for n, end in expected.items() if end not in never_run}
        assert all(count == 1 for count in ran.values())


async def test_each_node_reads_what_its_succeeded_upstreams_returned(where: object) -> None:
    async with _client(where) as client:
        queued = await client.enqueue_pipeline(etl(), run_id="data")
        async with _worker(where):
            final = await queued.wait(timeout=60)
        assert final.status is TaskStatus.SUCCEEDED, final.failure
        results = final.result["results"]
        assert results["s2"] == 12  # sum(fetch) * 2: the fetch result reached the shard
        assert results["load"] == [["s0", 0], ["s1", 6], ["s2", 12]]
        assert results["audit"] == ["load"]
        load_row = await client.get("data:load")
        assert load_row.label == "etl/load"
        assert await client.store.parent_of("data:load") == "data"  # type: ignore[union-attr]


async def test_a_coordinator_handed_back_mid_graph_resumes_on_another_worker(
    where: object,
) -> None:
    async with _client(where) as client:
        queued = await client.enqueue_pipeline(etl(shard_task="gated"), run_id="moved")
        async with _worker(where, owner="w-1"):
            # Every shard enqueued and parked on its fact before the first worker goes
            # (a shard still starting when its worker closes is another test's matter).
            shards = {"moved:s0", "moved:s1", "moved:s2"}
            for _ in range(600):
                rows = {t.task_id: t for t in await client.list_tasks()}
                parked = {
                    task_id
                    for task_id, t in rows.items()
                    if t.status is TaskStatus.QUEUED and t.owner is None and t.attempt >= 1
                }
                if shards <= parked:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"the shards were not parked: {rows}")
        assert not (await client.get("moved")).is_terminal
        async with _worker(where, owner="w-2"):
            for shard in range(3):
                await client.signal(f"moved:s{shard}", "go")
            final = await queued.wait(timeout=60)
        assert final.status is TaskStatus.SUCCEEDED, final.failure
        assert final.result["results"]["load"] == [["s0", 6], ["s1", 7], ["s2", 8]]
        assert ran == Counter(
            {"fetch": 1, "gated 0": 1, "gated 1": 1, "gated 2": 1, "load": 1, "audit": 1}
        )
        store = client.store
        assert store is not None
        spawned = [step.name for step in await store.steps("moved")].count("child:enqueue")
        assert spawned == 6  # the second worker replayed the first one's spawns


async def test_a_node_nobody_serves_is_refused_and_nothing_is_written(where: object) -> None:
    async with _client(where) as client:
        pipeline = Pipeline("etl")
        pipeline.node("fetch", "d")
        pipeline.node("nobody-runs-this", depends_on=["fetch"])
        with pytest.raises(UnknownTask) as caught:
            await client.enqueue_pipeline(pipeline, run_id="r")
        notes = "\n".join(caught.value.__notes__)
        assert "no live worker serves it" in notes
        assert "node 'nobody-runs-this'" in notes
        assert await client.list_tasks() == []


async def test_a_live_worker_serving_the_name_is_enough(where: object) -> None:
    async with Controller(
        store=MAKER[0].make(where), owner="bare", poll_interval=0.05
    ) as bare:  # registers nothing
        async with _worker(where):
            pipeline = Pipeline("one")
            pipeline.node("fetch", "d")
            queued = await bare.enqueue_pipeline(pipeline, run_id="served")
            final = await queued.wait(timeout=60)
        assert final.status is TaskStatus.SUCCEEDED, final.failure
        assert final.result["results"] == {"fetch": [1, 2, 3]}


@pytest.mark.parametrize(
    ("build", "error", "text"),
    [
        (lambda p: p.node("transform", "x", "y", "z"), ConfigurationError, "transform"),
        (lambda p: p.node("fetch", node_id="a", depends_on=["a"]), PipelineCycle, "'a'"),
    ],
)
async def test_bad_graphs_and_arguments_write_nothing(
    where: object, build: Any, error: type[Exception], text: str
) -> None:
    async with _client(where) as client:
        pipeline = Pipeline("bad")
        build(pipeline)
        with pytest.raises(error) as caught:
            await client.enqueue_pipeline(pipeline)
        assert text in str(caught.value) + "\n".join(getattr(caught.value, "__notes__", []))
        with pytest.raises(PayloadError):
            await client.enqueue_pipeline(etl(), run_id="has:colon")
        with pytest.raises(ConfigurationError, match="takes a Pipeline"):
            await client.enqueue_pipeline("etl")  # type: ignore[arg-type]
        assert await client.list_tasks() == []


async def test_stopping_the_coordinator_stops_its_running_nodes(where: object) -> None:
    async with _client(where) as client:
        queued = await client.enqueue_pipeline(etl(shard_task="gated"), run_id="halt")
        async with _worker(where):
            for _ in range(600):
                rows = {t.task_id for t in await client.list_tasks()}
                if "halt:s2" in rows:
                    break
                await asyncio.sleep(0.05)
            await client.stop("halt", reason="not tonight")
            final = await queued.wait(timeout=60)
            shards = [await client.get(f"halt:s{n}") for n in range(3)]
            for _ in range(600):
                shards = [await client.get(f"halt:s{n}") for n in range(3)]
                if all(s.is_terminal for s in shards):
                    break
                await asyncio.sleep(0.05)
        assert final.status is TaskStatus.STOPPED, final.failure
        assert {s.status for s in shards} == {TaskStatus.STOPPED}
        assert not any(f"gated {n}" in ran for n in range(3))
        assert "load" not in {t.task_id.split(":")[-1] for t in await client.list_tasks()}


def test_the_graph_travels_as_json(tmp_path: Path) -> None:
    from chongming.controller.stored_pipelines import graph_to_json

    graph = graph_to_json(etl().validate())
    assert [node["id"] for node in graph["nodes"]] == ["fetch", "s0", "s1", "s2", "load", "audit"]
    assert graph["nodes"][-1]["join"] == "all_settled"
    assert graph["aggregation"] == "fail_fast"


async def test_a_run_id_in_use_is_refused_and_the_first_run_is_untouched(where: object) -> None:
    from chongming import DuplicateTaskId

    async with _client(where) as client:
        first = await client.enqueue_pipeline(etl(), run_id="once")
        with pytest.raises(DuplicateTaskId):
            await client.enqueue_pipeline(etl(AggregationPolicy.ALL_SETTLED), run_id="once")
        stored = await client.get("once")
        assert stored.args[0]["aggregation"] == "fail_fast"  # the first run's graph
        assert [t.task_id for t in await client.list_tasks()] == [first.task_id]


async def test_a_controller_without_a_store_is_told_it_needs_one() -> None:
    async with Controller() as memory_only:
        _register_plain(memory_only)
        with pytest.raises(ConfigurationError, match="needs a store"):
            await memory_only.enqueue_pipeline(etl())


async def test_the_handle_gives_nodes_the_graph_and_a_stop_from_any_process(
    where: object,
) -> None:
    from chongming import StoredPipeline, TaskNotFound

    async with _client(where) as client:
        queued = await client.enqueue_pipeline(etl(shard_task="gated"), run_id="handled")
        assert isinstance(queued, StoredPipeline)
        assert queued.node_ids == ("fetch", "s0", "s1", "s2", "load", "audit")
        assert await queued.node("load") is None  # not enqueued (yet)
        with pytest.raises(ConfigurationError, match="has no node 'nope'; its nodes: fetch"):
            await queued.node("nope")
        async with _worker(where):
            for _ in range(600):
                if (node := await queued.node("s2")) is not None:
                    break
                await asyncio.sleep(0.05)
            assert node is not None
            assert node.task_id == "handled:s2"
            again = await client.stored_pipeline("handled")  # as another process would
            view = await again.view()
            assert [n.status for n in view.nodes][:1] == ["succeeded"]
            assert view.nodes[-1].status == "blocked"
            assert await again.stop(reason="not tonight")
            final = await queued.wait(timeout=60)
        assert final.status is TaskStatus.STOPPED
        assert not await again.stop()  # it had ended: nothing sent
        with pytest.raises(TaskNotFound):
            await client.stored_pipeline("ghost")
        plain = await client.enqueue("load", task_id="plain-load")
        with pytest.raises(ConfigurationError, match="is a 'load' task, not a stored pipeline"):
            await client.stored_pipeline(plain.task_id)
