"""A pipeline on the shared plane: the nightly ETL enqueued once, run by two workers.

Run it: ``python docs/examples/stored_pipeline.py``. A client enqueues the
graph with ``controller.enqueue_pipeline``: one durable coordinator task
(``chongming:pipeline``, task id = the run id) that any worker may take. It
enqueues each node as its child ``<run_id>:<node_id>`` once the node's join
holds; two workers share the nodes. A second run with a failing shard shows
fail-fast: ``load`` is skipped, ``audit`` called off, and the coordinator
fails, naming the node.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from chongming import Controller, TaskContext
from chongming.pipeline import JoinMode, Pipeline


async def fetch(ctx: TaskContext, day: str) -> list[int]:
    return [3, 1, 2]


async def transform(ctx: TaskContext, shard: int, *, fail: bool = False) -> int:
    if fail:
        raise ValueError(f"shard {shard}: bad rows")
    rows = ctx.input("fetch", [])  # the fetch node's result, read on whichever worker
    return sum(rows) * (shard + 1)


async def load(ctx: TaskContext) -> int:
    return sum(value for value in ctx.upstream.values())


async def audit(ctx: TaskContext) -> str:
    return f"audited: {', '.join(sorted(ctx.upstream)) or 'nothing loaded'}"


def register(controller: Controller) -> None:
    controller.register("fetch", fetch)
    controller.register("transform", transform)
    controller.register("load", load)
    controller.register("audit", audit)


def nightly_etl(failing_shard: int | None = None) -> Pipeline:
    pipeline = Pipeline("nightly-etl")  # fail-fast
    fetched = pipeline.node("fetch", "2026-12-03", node_id="fetch")
    shards = [
        pipeline.node(
            "transform", n, fail=n == failing_shard, node_id=f"shard{n}", depends_on=[fetched]
        )
        for n in range(3)
    ]
    loaded = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[loaded], join=JoinMode.ALL_SETTLED)
    return pipeline


def _worker(db: Path, owner: str) -> Controller:
    worker = Controller(store=db, owner=owner, work=True, max_parallel=2)
    register(worker)
    return worker


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "etl.db"
        async with Controller(store=db, owner="scheduler") as client:
            register(client)
            good = await client.enqueue_pipeline(nightly_etl(), run_id="night-1")
            bad = await client.enqueue_pipeline(nightly_etl(failing_shard=1), run_id="night-2")
            async with _worker(db, "worker-1"), _worker(db, "worker-2"):
                first = await good.wait(timeout=60)
                second = await bad.wait(timeout=60)
            print(first.task_id, first.name, first.status.value)
            for node, end in first.result["nodes"].items():
                print(f"  {node:7} {end['status']:10} {end['task_id']}")
            print("  load =", first.result["results"]["load"])
            print("  audit:", first.result["results"]["audit"])
            print(second.task_id, second.status.value)
            assert second.failure is not None
            print(" ", second.failure.message)
            store = client.store
            assert store is not None
            print("parent of night-1:load:", await store.parent_of("night-1:load"))
            never = [n for n in ("load", "audit") if not await store.get(f"night-2:{n}")]
            print("never enqueued in night-2:", ", ".join(never))


if __name__ == "__main__":
    asyncio.run(main())
