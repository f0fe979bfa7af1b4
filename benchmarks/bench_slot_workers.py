"""What long-lived slot workers could save over a task per attempt, in raw asyncio.

    python benchmarks/bench_slot_workers.py [--n 100000] [--rounds 3]

The lean-core issue asked for admission slots as long-lived worker
coroutines that run queued attempts back to back, kept only if it pays.
This measures the most it could pay, with nothing of chongming in the way:
the same trivial coroutine run (a) as one ``asyncio.Task`` per item behind a
``Semaphore(1000)`` (what the controller does per attempt) and (b) by 1,000
worker coroutines that await the items back to back from a deque. The
difference per item is the ceiling of the saving; compare it with the
controller's cost per task (``bench_controller.py``). For instruction
counts, run one side under ``valgrind --tool=cachegrind`` at two sizes and
subtract (``--side``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import time

PARALLEL = 1000


async def trivial() -> int:
    return 1


async def task_per_item(n: int) -> None:
    semaphore = asyncio.Semaphore(PARALLEL)

    async def one() -> int:
        async with semaphore:
            return await trivial()

    tasks = [asyncio.create_task(one()) for _ in range(n)]
    for task in tasks:
        await task


async def slot_workers(n: int) -> None:
    queue = collections.deque(trivial for _ in range(n))

    async def worker() -> None:
        while queue:
            await queue.popleft()()

    workers = [asyncio.create_task(worker()) for _ in range(min(PARALLEL, n))]
    for task in workers:
        await task


SIDES = {"task-per-item": task_per_item, "slot-workers": slot_workers}


async def main(n: int, rounds: int) -> dict[str, float]:
    best = dict.fromkeys(SIDES, float("inf"))
    for _ in range(rounds):
        for name, side in SIDES.items():
            gc.collect()
            started = time.process_time()
            await side(n)
            best[name] = min(best[name], time.process_time() - started)
    per_task, per_worker = (best[name] / n * 1e6 for name in SIDES)
    print(
        f"{n:,} trivial coroutines: a task each {per_task:.2f} us, "
        f"slot workers {per_worker:.2f} us of CPU per item; "
        f"the most slot workers could save: {per_task - per_worker:.2f} us per task"
    )
    return {"task_per_item_us": per_task, "slot_workers_us": per_worker}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--side", choices=sorted(SIDES), help="run one side once (for valgrind)")
    options = parser.parse_args()
    if options.side:
        asyncio.run(SIDES[options.side](options.n))
    else:
        asyncio.run(main(options.n, options.rounds))
