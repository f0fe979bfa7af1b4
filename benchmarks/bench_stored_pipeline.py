"""A fan-out / fan-in pipeline stored and run by two workers, beside the same DAG in process.

    python benchmarks/bench_stored_pipeline.py [--nodes 1000] [--slots 8]

Subject: ``controller.enqueue_pipeline`` of a root, ``nodes - 2`` shards
depending on it and a sink depending on every shard, on one SQLite file,
run by two workers (``max_parallel=slots`` each) in this process: the
coordinator spawns each node as a child (a memoised enqueue with its
upstream fact) and takes the ends with ``ctx.as_completed``. Baseline: the
same DAG with ``submit_pipeline`` on one controller without a store (the
nodes live in memory only), and with a SQLite store the nodes are written
through to (each node's trajectory durable, the graph not). The ratios are
stored time over each: what surviving a crash costs.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from chongming import Controller
from chongming.pipeline import Pipeline


async def trivial(ctx: Any) -> int:
    return 1


async def sink(ctx: Any) -> int:
    return len(ctx.upstream)


def _register(controller: Controller) -> None:
    controller.register("trivial", trivial)
    controller.register("sink", sink)


def fan(nodes: int) -> Pipeline:
    pipeline = Pipeline("fan-out-fan-in")
    root = pipeline.node("trivial", node_id="root")
    shards = [
        pipeline.node("trivial", node_id=f"s{n}", depends_on=[root]) for n in range(nodes - 2)
    ]
    pipeline.node("sink", node_id="sink", depends_on=shards)
    return pipeline


async def in_process(nodes: int, slots: int, db: Path | None = None) -> float:
    async with Controller(store=db, max_parallel=2 * slots, keep_finished=nodes) as controller:
        _register(controller)
        started = time.perf_counter()
        run = await controller.submit_pipeline(fan(nodes))
        outcome = await run.wait(timeout=600)
        elapsed = time.perf_counter() - started
    assert outcome.value("sink") == nodes - 2
    return elapsed


async def stored(db: Path, nodes: int, slots: int) -> float:
    async with Controller(store=db, owner="client", poll_interval=0.01) as client:
        _register(client)
        workers = []
        for owner in ("w-1", "w-2"):
            worker = Controller(
                store=db, owner=owner, work=True, max_parallel=slots, poll_interval=0.01
            )
            _register(worker)
            workers.append(worker)
        async with workers[0], workers[1]:
            started = time.perf_counter()
            queued = await client.enqueue_pipeline(fan(nodes))
            final = await queued.wait(timeout=1200)
            elapsed = time.perf_counter() - started
    assert final.result["results"]["sink"] == nodes - 2, final.failure
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=8)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        on_plane = await stored(Path(directory) / "p.db", options.nodes, options.slots)
        written = await in_process(options.nodes, options.slots, Path(directory) / "w.db")
    baseline = await in_process(options.nodes, options.slots)
    print(f"stored:     {options.nodes} nodes on 2 workers in {on_plane:.2f} s "
          f"({options.nodes / on_plane:.0f} nodes/s)")  # fmt: skip
    print(f"in process: {options.nodes} nodes in {baseline * 1000:.1f} ms "
          f"({options.nodes / baseline:.0f} nodes/s)")  # fmt: skip
    print(f"in process, written through to SQLite: {written:.2f} s "
          f"({options.nodes / written:.0f} nodes/s)")  # fmt: skip
    print(f"stored time / in-process time: {on_plane / baseline:.0f}x; "
          f"/ in-process written through: {on_plane / written:.1f}x")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
