"""The nightly ETL as a DAG pipeline: fetch -> three shards -> load -> audit.

The same graph runs four times:

1. everything succeeds: right after submit the downstream nodes wait in
   ``blocked`` (no slot, not queued); the shards read fetch's result and
   load reads the shards';
2. shard1 fails under ``AggregationPolicy.ALL_SETTLED``: load is **skipped**
   (its barrier can never hold) and audit, whose join is ``ALL_SETTLED``,
   still runs — and sees that load is absent;
3. shard1 fails under ``FAIL_FAST`` (the default): load is skipped, audit is
   **cancelled** — it would have run, but the failure called it off;
4. an operator stops the pipeline while the shards run: they are
   **stopped**, load and audit cancelled, and the outcome is ``cancelled``.

Then the three endings side by side.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chongming import Controller, TaskStatus
from chongming.pipeline import AggregationPolicy, JoinMode, Pipeline, PipelineRun
from chongming.render import render_pipeline, render_rows


async def fetch(ctx: Any, day: str) -> list[str]:
    for _ in range(10):
        await ctx.checkpoint()
        await asyncio.sleep(0.01)
    return [f"s3://warehouse/{day}/part-{index}" for index in range(3)]


async def transform(ctx: Any, index: int, fail: bool = False, steps: int = 10) -> int:
    part = ctx.input("fetch")  # fetch's result: every shard gets its own copy
    for _ in range(steps):
        await ctx.checkpoint()  # where a stop takes effect
        if fail:
            raise ValueError(f"corrupt rows in {part[index]}")
        await asyncio.sleep(0.02)
    return 100 * (index + 1)


async def load(ctx: Any) -> int:
    return sum(ctx.input(f"shard{index}") for index in range(3))


async def audit(ctx: Any) -> str:
    # Only succeeded upstreams are present: a skipped load is absent, never None.
    if "load" in ctx.upstream:
        return f"loaded {ctx.input('load')} rows"
    return "load did not succeed; nothing to reconcile"


def nightly_etl(
    aggregation: AggregationPolicy = AggregationPolicy.FAIL_FAST,
    failing_shard: int | None = None,
    steps: int = 10,
) -> Pipeline:
    pipeline = Pipeline("nightly-etl", aggregation=aggregation)
    fetched = pipeline.node("fetch", "2026-10-02", node_id="fetch")
    shards = [
        pipeline.node(
            "transform",
            index,
            fail=index == failing_shard,
            steps=steps,
            node_id=f"shard{index}",
            depends_on=[fetched],
        )
        for index in range(3)
    ]
    loaded = pipeline.node("load", node_id="load", depends_on=shards)  # barrier: every shard
    pipeline.node("audit", node_id="audit", depends_on=[loaded], join=JoinMode.ALL_SETTLED)
    return pipeline


async def until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.005)


def show_end(run: PipelineRun, status: str) -> None:
    print(render_pipeline(run.snapshot()))
    print(f"outcome: {status}")
    for node in run.snapshot().nodes:
        if node.status in (TaskStatus.SKIPPED, TaskStatus.CANCELLED):
            print(f"  {node.node_id:<6} {node.status.value:<9} by {node.trigger}: {node.reason}")


async def main() -> None:
    async with Controller(max_parallel=4) as controller:
        for name, fn in (("fetch", fetch), ("transform", transform)):
            controller.register(name, fn)
        controller.register("load", load)
        controller.register("audit", audit)

        print("== 1. Every node succeeds ==")
        run = await controller.submit_pipeline(nightly_etl(), run_id="etl-ok")
        await until(lambda: run.node("fetch").status is TaskStatus.RUNNING)
        print("--- just submitted: the downstream nodes wait in blocked ---")
        print(render_pipeline(run.snapshot()))
        stats = await controller.stats()
        print(f"queued {stats.queued}, holding a slot {stats.holding_slot}")
        outcome = await run.wait(timeout=30)
        print("--- at the end ---")
        show_end(run, outcome.status.value)
        print(f"audit says: {outcome.value('audit')}")
        print(f"task id of load: {run.node('load').task_id}")

        print("\n== 2. shard1 fails, aggregation ALL_SETTLED ==")
        settled = await controller.submit_pipeline(
            nightly_etl(AggregationPolicy.ALL_SETTLED, failing_shard=1), run_id="etl-settled"
        )
        outcome = await settled.wait(timeout=30)
        show_end(settled, outcome.status.value)
        print(f"audit says: {outcome.value('audit')}")
        print("history of load:")
        for step in settled.node("load").transitions:
            print(f"  {step.from_status.value:>8} -> {step.to_status.value:<8} by {step.trigger}")

        print("\n== 3. shard1 fails, FAIL_FAST ==")
        fast = await controller.submit_pipeline(nightly_etl(failing_shard=1), run_id="etl-fast")
        outcome = await fast.wait(timeout=30)
        show_end(fast, outcome.status.value)
        print(f"first failure: {outcome.first_failure}")

        print("\n== 4. An operator stops the pipeline while the shards run ==")
        stopped = await controller.submit_pipeline(nightly_etl(steps=500), run_id="etl-stopped")
        shard_runs = [stopped.node(f"shard{index}") for index in range(3)]
        await until(lambda: all(r.status is TaskStatus.RUNNING for r in shard_runs))
        issued = await stopped.stop("wrong input day", actor="oncall")
        print(f"stop issued: {issued}")
        outcome = await stopped.wait(timeout=30)
        show_end(stopped, outcome.status.value)

        print("\n== The three endings side by side ==")
        runs = (settled, fast, stopped)
        rows = [
            (node.node_id, *(run.node(node.node_id).status.value for run in runs))
            for node in settled.graph.nodes
        ]
        print(render_rows(("NODE", "ALL_SETTLED+FAIL", "FAIL_FAST+FAIL", "STOPPED_BY_HAND"), rows))


if __name__ == "__main__":
    asyncio.run(main())
