"""Controller throughput beside raw asyncio in the same process run.

    python benchmarks/bench_controller.py [--n 100000] [--rounds 3]

Baseline: ``asyncio.create_task`` + ``asyncio.Semaphore(1000)`` running the same
trivial coroutine. Subject: the same number of ``async def`` tasks submitted
to a ``Controller(max_parallel=1000)``, every one with its full audited
trajectory, then ``wait_all``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

from chongming.controller import Controller

PARALLEL = 1000


async def trivial(ctx: object) -> int:
    return 1


async def raw(n: int) -> float:
    semaphore = asyncio.Semaphore(PARALLEL)

    async def one() -> int:
        async with semaphore:
            return 1

    started = time.perf_counter()
    tasks = [asyncio.create_task(one()) for _ in range(n)]
    for task in tasks:
        await task
    return n / (time.perf_counter() - started)


async def through_controller(n: int) -> float:
    async with Controller(max_parallel=PARALLEL, keep_finished=n) as controller:
        controller.register("trivial", trivial)
        started = time.perf_counter()
        for _ in range(n):
            await controller.submit("trivial")
        outcomes = await controller.wait_all()
        elapsed = time.perf_counter() - started
    assert all(outcome.ok for outcome in outcomes)
    return n / elapsed


async def main(n: int, rounds: int) -> dict[str, float]:
    best_raw = best_subject = 0.0
    for _ in range(rounds):
        gc.collect()
        best_raw = max(best_raw, await raw(n))
        gc.collect()
        best_subject = max(best_subject, await through_controller(n))
    ratio = best_subject / best_raw
    print(
        f"controller, {n:,} async tasks (max_parallel={PARALLEL}): "
        f"raw {best_raw:,.0f}/s  chongming {best_subject:,.0f}/s  ratio {ratio:.2f}x (goal >= 0.5)"
    )
    return {"raw": best_raw, "chongming": best_subject, "ratio": ratio}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.n, options.rounds))
