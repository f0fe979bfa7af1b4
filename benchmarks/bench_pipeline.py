"""A 1,000-node fan-out / fan-in pipeline beside the same tasks submitted directly.

    python benchmarks/bench_pipeline.py [--nodes 1000] [--rounds 5]

Baseline: ``nodes`` trivial ``async def`` tasks submitted one by one to a
``Controller(max_parallel=1000)`` and awaited with ``wait_all`` — every one
with its full audited trajectory. Subject: the same number of the same
tasks as one pipeline in the same controller settings: a root, ``nodes - 2``
shards depending on it, and a sink depending on every shard (so the shards
go ``pending -> blocked -> queued``, the sink gets 998 upstream results, and
the graph is validated first). Both sides are timed from the first submit
to the last end; the ratio is pipeline time over direct time (1.0: no
overhead). The pipeline has an inherent extra cost the baseline does not:
its three waves run one after another (root, shards, sink).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

from chongming.controller import Controller
from chongming.pipeline import Pipeline

PARALLEL = 1000


async def trivial(ctx: Any) -> int:
    return 1


async def sink(ctx: Any) -> int:
    return len(ctx.upstream)


async def direct(nodes: int) -> float:
    async with Controller(max_parallel=PARALLEL, keep_finished=nodes) as controller:
        controller.register("trivial", trivial)
        controller.register("sink", sink)
        started = time.perf_counter()
        for _ in range(nodes - 1):
            await controller.submit("trivial")
        await controller.submit("sink")
        outcomes = await controller.wait_all()
        elapsed = time.perf_counter() - started
    assert all(outcome.ok for outcome in outcomes)
    return elapsed


async def as_pipeline(nodes: int) -> float:
    async with Controller(max_parallel=PARALLEL, keep_finished=nodes) as controller:
        controller.register("trivial", trivial)
        controller.register("sink", sink)
        started = time.perf_counter()
        pipeline = Pipeline("fan-out-fan-in")
        root = pipeline.node("trivial", node_id="root")
        shards = [
            pipeline.node("trivial", node_id=f"shard{index}", depends_on=[root])
            for index in range(nodes - 2)
        ]
        pipeline.node("sink", node_id="sink", depends_on=shards)
        run = await controller.submit_pipeline(pipeline)
        outcome = await run.wait()
        elapsed = time.perf_counter() - started
    assert outcome.ok
    assert outcome.value("sink") == nodes - 2
    return elapsed


async def main(nodes: int, rounds: int) -> dict[str, float]:
    best_direct = best_pipeline = float("inf")
    for _ in range(rounds):
        gc.collect()
        best_direct = min(best_direct, await direct(nodes))
        gc.collect()
        best_pipeline = min(best_pipeline, await as_pipeline(nodes))
    ratio = best_pipeline / best_direct
    print(
        f"pipeline, {nodes:,} nodes fan-out/fan-in vs {nodes:,} direct submits "
        f"(max_parallel={PARALLEL}): direct {best_direct * 1000:.1f} ms  "
        f"pipeline {best_pipeline * 1000:.1f} ms  overhead ratio {ratio:.2f}x "
        f"({(best_pipeline - best_direct) / nodes * 1e6:.1f} us per node)"
    )
    return {"direct": best_direct, "pipeline": best_pipeline, "ratio": ratio}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    asyncio.run(main(options.nodes, options.rounds))
