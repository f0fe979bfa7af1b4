"""How the controller scales: dispatch cost vs queue length, memory, loop lag.

    python benchmarks/bench_controller_scale.py [--small 1000] [--large 100000]

- dispatch: per-task time to run N queued trivial tasks (max_parallel=1000)
  for a small and a large N; the ratio large/small should stay near 1
  (heaps, not scans). Reported with the garbage collector on (what users
  get) and paused (the algorithmic cost alone).
- memory: tracemalloc bytes per queued task.
- lag: p99 event-loop lag measured by a 5 ms ticker while 10,000 tasks run,
  each checkpointing and sleeping.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc

from chongming.controller import Controller


async def trivial(ctx: object) -> int:
    return 1


async def busy(ctx) -> int:  # type: ignore[no-untyped-def]
    for _ in range(5):
        await ctx.checkpoint()
        await asyncio.sleep(0.001)
    return 1


async def dispatch_cost(n: int, collect: bool) -> float:
    """Fill every slot with a blocked task, queue ``n`` more, then time the drain."""
    gate = asyncio.Event()

    async def blocked(ctx: object) -> int:
        await gate.wait()
        return 1

    async with Controller(max_parallel=1000, keep_finished=0) as controller:
        controller.register("trivial", trivial)
        controller.register("blocked", blocked)
        for _ in range(1000):
            await controller.submit("blocked")
        for _ in range(n):
            await controller.submit("trivial")
        assert (await controller.stats()).queued == n
        gate.set()
        if not collect:
            gc.disable()
        try:
            started = time.perf_counter()
            await controller.wait_all()
            elapsed = time.perf_counter() - started
        finally:
            gc.enable()
    return elapsed / n * 1e6


async def memory_per_queued_task(n: int) -> float:
    async with Controller(max_parallel=1) as controller:
        controller.register("trivial", trivial)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for _ in range(n):
            await controller.submit("trivial")
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        await controller.stop_all()
    return grown / n


class Ticker:
    """Measures how late a 5 ms sleep wakes up: the loop's lag."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.done = asyncio.Event()

    async def run(self) -> None:
        while not self.done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.005)
            self.lags.append(time.perf_counter() - started - 0.005)

    def p99_ms(self) -> float:
        lags = sorted(self.lags)
        return lags[max(0, int(len(lags) * 0.99) - 1)] * 1000 if lags else 0.0

    def median_ms(self) -> float:
        return statistics.median(self.lags) * 1000 if self.lags else 0.0


async def lag_raw(n: int) -> Ticker:
    async def one() -> int:
        for _ in range(5):
            await asyncio.sleep(0)
            await asyncio.sleep(0.001)
        return 1

    ticker = Ticker()
    tick = asyncio.create_task(ticker.run())
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(one()) for _ in range(n)]
    for task in tasks:
        await task
    ticker.done.set()
    await tick
    return ticker


async def lag_controller(n: int) -> Ticker:
    ticker = Ticker()
    async with Controller(max_parallel=n) as controller:
        controller.register("busy", busy)
        tick = asyncio.create_task(ticker.run())
        await asyncio.sleep(0)
        for _ in range(n):
            await controller.submit("busy")
        await controller.wait_all()
        ticker.done.set()
        await tick
    return ticker


async def main(small: int, large: int) -> None:
    for collect in (True, False):
        label = "gc on " if collect else "gc off"
        small_cost = min([await dispatch_cost(small, collect) for _ in range(3)])
        large_cost = await dispatch_cost(large, collect)
        print(
            f"dispatch ({label}): {small:,} queued {small_cost:.1f} us/task, "
            f"{large:,} queued {large_cost:.1f} us/task, ratio {large_cost / small_cost:.2f}"
            " (goal <= 1.5)"
        )
    print(f"memory: {await memory_per_queued_task(10_000):,.0f} bytes per queued task")
    raw = await lag_raw(10_000)
    ours = await lag_controller(10_000)
    print(
        f"loop lag while 10,000 tasks run: raw asyncio p99 {raw.p99_ms():.1f} ms "
        f"(median {raw.median_ms():.1f}), controller p99 {ours.p99_ms():.1f} ms "
        f"(median {ours.median_ms():.1f}), ratio {ours.p99_ms() / max(raw.p99_ms(), 1e-9):.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    options = parser.parse_args()
    asyncio.run(main(options.small, options.large))
