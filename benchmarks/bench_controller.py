"""Controller throughput beside raw asyncio in the same process run.

    python benchmarks/bench_controller.py [--n 100000] [--rounds 3] [--calls 2000] [--memory-store]

Baseline: ``asyncio.create_task`` + ``asyncio.Semaphore(1000)`` running the same
trivial coroutine. Subject: the same number of ``async def`` tasks submitted
to a ``Controller(max_parallel=1000)``, every one with its full audited
trajectory, then ``wait_all``. With ``--memory-store`` a third side runs the
same tasks on a controller whose every transition is written through to an
``InMemoryTaskStore`` (the write-through's cost without any I/O).

Beside wall clock it reports CPU time (``time.process_time``: less sensitive
to other processes on a loaded machine) and, with ``--calls N``, the function
calls per task of each side, counted by ``cProfile`` over N tasks: Python
calls (the interpreter's frames) and C calls apart. For instruction counts,
run one side under ``valgrind --tool=callgrind`` at two sizes and subtract.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import time
from collections.abc import Awaitable, Callable

from chongming.controller import Controller
from chongming.stores.memory import InMemoryTaskStore

PARALLEL = 1000


async def trivial(ctx: object) -> int:
    return 1


class Meter:
    """Wall and CPU seconds of the measured part, optionally under a profiler."""

    def __init__(self, profile: bool = False) -> None:
        self.profiler = cProfile.Profile() if profile else None
        self.wall = self.cpu = 0.0

    def __enter__(self) -> Meter:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        if self.profiler is not None:
            self.profiler.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.profiler is not None:
            self.profiler.disable()
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def calls(self, n: int) -> tuple[float, float]:
        """(Python calls, C calls) per task."""
        assert self.profiler is not None
        stats = pstats.Stats(self.profiler).stats  # type: ignore[attr-defined]
        python = sum(v[1] for k, v in stats.items() if k[0] != "~")
        builtin = sum(v[1] for k, v in stats.items() if k[0] == "~")
        return python / n, builtin / n


async def raw(n: int, meter: Meter) -> None:
    semaphore = asyncio.Semaphore(PARALLEL)

    async def one() -> int:
        async with semaphore:
            return 1

    with meter:
        tasks = [asyncio.create_task(one()) for _ in range(n)]
        for task in tasks:
            await task


async def through_controller(n: int, meter: Meter) -> None:
    async with Controller(max_parallel=PARALLEL, keep_finished=n) as controller:
        controller.register("trivial", trivial)
        with meter:
            for _ in range(n):
                await controller.submit("trivial")
            outcomes = await controller.wait_all()
    assert all(outcome.ok for outcome in outcomes)


async def through_memory_store(n: int, meter: Meter) -> None:
    store = InMemoryTaskStore()
    async with Controller(max_parallel=PARALLEL, keep_finished=n, store=store) as controller:
        controller.register("trivial", trivial)
        with meter:
            for _ in range(n):
                await controller.submit("trivial")
            outcomes = await controller.wait_all()
    assert all(outcome.ok for outcome in outcomes)


Side = Callable[[int, Meter], Awaitable[None]]


async def main(n: int, rounds: int, calls: int = 0, memory_store: bool = False) -> dict[str, float]:
    sides: tuple[tuple[str, Side], ...] = (("raw", raw), ("chongming", through_controller))
    if memory_store:
        sides += (("memory-store", through_memory_store),)
    best: dict[str, tuple[float, float]] = {}
    for _ in range(rounds):
        for name, side in sides:
            gc.collect()
            meter = Meter()
            await side(n, meter)
            wall, cpu = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(wall, meter.wall), min(cpu, meter.cpu))
    (raw_wall, raw_cpu), (our_wall, our_cpu) = best["raw"], best["chongming"]
    ratio, cpu_ratio = raw_wall / our_wall, raw_cpu / our_cpu
    print(
        f"controller, {n:,} async tasks (max_parallel={PARALLEL}): "
        f"raw {n / raw_wall:,.0f}/s  chongming {n / our_wall:,.0f}/s  ratio {ratio:.2f}x "
        f"(goal >= 0.5); CPU {raw_cpu / n * 1e6:.2f} vs {our_cpu / n * 1e6:.2f} us/task, "
        f"ratio {cpu_ratio:.2f}x"
    )
    result = {"raw": n / raw_wall, "chongming": n / our_wall, "ratio": ratio, "cpu": cpu_ratio}
    if memory_store:
        store_wall, store_cpu = best["memory-store"]
        print(
            f"  written through to the in-memory store: {n / store_wall:,.0f}/s, ratio "
            f"{raw_wall / store_wall:.3f}x (goal >= 0.35); CPU {store_cpu / n * 1e6:.2f} us/task, "
            f"ratio {raw_cpu / store_cpu:.3f}x"
        )
        result["memory_store_ratio"] = raw_wall / store_wall
    if calls:
        for name, side in sides:
            gc.collect()
            meter = Meter(profile=True)
            await side(calls, meter)
            python, builtin = meter.calls(calls)
            result[f"{name}_python_calls"] = python
            print(f"  {name:<12} {python:6.1f} Python calls, {builtin:5.1f} C calls per task")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--calls", type=int, default=2_000, help="tasks to count calls over (0: no)"
    )
    parser.add_argument(
        "--memory-store", action="store_true", help="also write through to an InMemoryTaskStore"
    )
    options = parser.parse_args()
    asyncio.run(main(options.n, options.rounds, options.calls, options.memory_store))
