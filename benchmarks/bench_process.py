"""The process executor beside its baselines, in the same run.

    python benchmarks/bench_process.py [--n 2000] [--workers 2] [--stops 200]
                                       [--start-method spawn] [--rounds 3]

1. Per-task overhead: trivial sync tasks through ``run_task(executor=
   ProcessExecutor(...))`` vs ``loop.run_in_executor(ProcessPoolExecutor(...))``
   with the same worker count and start method (goal >= 0.5x its throughput,
   while keeping hard stop, pause and crash isolation).
2. Stop latency: from ``stop()`` to the moment the child left its checkpoint
   (read on the system's monotonic clock, which both processes share), p50
   and p99 (goal p50 <= 5 ms); and to ``stopped`` being recorded.
3. CPU-bound work: the same pure-Python tasks on the thread executor and on
   the process executor, ``--workers`` of each (the speed-up the GIL allows).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from chongming import ControlWindows, TaskCancelled, TaskContext, TaskRun, TaskStatus, run_task
from chongming.executors import ProcessExecutor, ThreadExecutor


def trivial(ctx: TaskContext) -> int:
    return 1


def plain() -> int:
    return 1


def spin_until_stopped(ctx: TaskContext, path: str) -> None:
    """Checkpoints in a tight loop; writes when it left its checkpoint."""
    try:
        while True:
            ctx.checkpoint()
    except TaskCancelled:
        Path(path).write_text(repr(time.monotonic()))
        raise


def crunch(ctx: TaskContext, n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


async def in_waves(n: int, parallel: int, one: Callable[[], Awaitable[object]]) -> None:
    for start in range(0, n, parallel):
        tasks = [asyncio.ensure_future(one()) for _ in range(min(parallel, n - start))]
        for task in tasks:
            await task


async def throughput(n: int, workers: int, method: str, rounds: int) -> None:
    parallel = workers * 4
    context = multiprocessing.get_context(method)
    loop = asyncio.get_running_loop()
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        async with ProcessExecutor(workers, start_method=method) as processes:

            async def raw() -> None:
                async def one() -> int:
                    return await loop.run_in_executor(pool, plain)

                await in_waves(n, parallel, one)

            async def ours() -> None:
                async def one() -> None:
                    outcome = await run_task(trivial, executor=processes)
                    assert outcome.ok, outcome

                await in_waves(n, parallel, one)

            await raw()  # warm both: every worker started, every import done
            await ours()
            base_best = ours_best = 0.0
            for _ in range(rounds):
                started = time.perf_counter()
                await raw()
                base_best = max(base_best, n / (time.perf_counter() - started))
                started = time.perf_counter()
                await ours()
                ours_best = max(ours_best, n / (time.perf_counter() - started))
    print(
        f"{'trivial tasks vs ProcessPoolExecutor':<38} baseline {base_best:>8,.0f}/s  "
        f"chongming {ours_best:>8,.0f}/s  ratio {ours_best / base_best:.2f}x (goal >= 0.5)"
    )


async def stop_latency(stops: int, method: str) -> None:
    windows = ControlWindows(stop_grace=5.0)
    left: list[float] = []
    recorded: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        async with ProcessExecutor(1, start_method=method) as processes:
            for i in range(stops):
                path = str(Path(directory) / f"left-{i}")
                async with TaskRun(
                    spin_until_stopped, (path,), executor=processes, windows=windows
                ) as run:
                    while run.status is not TaskStatus.RUNNING:
                        await asyncio.sleep(0.001)
                    await asyncio.sleep(0.005)  # inside its loop of checkpoints
                    asked = time.monotonic()
                    await run.stop()
                    outcome = await run.wait(30)
                    recorded.append(time.monotonic() - asked)
                assert outcome.status is TaskStatus.STOPPED, outcome
                left.append(_read_moment(path) - asked)
    print(
        f"{'stop -> child left its checkpoint':<38} p50 {_ms(left, 50):>6.2f} ms  "
        f"p99 {_ms(left, 99):>6.2f} ms  (goal p50 <= 5 ms, n={stops})"
    )
    print(
        f"{'stop -> stopped recorded':<38} p50 {_ms(recorded, 50):>6.2f} ms  "
        f"p99 {_ms(recorded, 99):>6.2f} ms"
    )


async def cpu_bound(workers: int, method: str, size: int) -> None:
    tasks = workers * 2

    async def elapsed(executor: ThreadExecutor | ProcessExecutor) -> float:
        await run_task(crunch, 1000, executor=executor)  # warm: workers up, imports done
        started = time.perf_counter()
        outcomes = await asyncio.gather(
            *(run_task(crunch, size, executor=executor) for _ in range(tasks))
        )
        assert all(outcome.ok for outcome in outcomes)
        return time.perf_counter() - started

    threads = ThreadExecutor(max_workers=workers)
    try:
        thread_time = await elapsed(threads)
    finally:
        await threads.aclose()
    async with ProcessExecutor(workers, start_method=method) as processes:
        process_time = await elapsed(processes)
    print(
        f"{f'{tasks} CPU-bound tasks, {workers} workers':<38} threads {thread_time:>6.2f} s  "
        f"processes {process_time:>6.2f} s  speed-up {thread_time / process_time:.2f}x"
    )


def _read_moment(path: str) -> float:
    return float(Path(path).read_text())


def _ms(values: list[float], percentile: int) -> float:
    ordered = sorted(values)
    if percentile == 50:
        return statistics.median(ordered) * 1000
    index = min(len(ordered) - 1, round(percentile / 100 * (len(ordered) - 1)))
    return ordered[index] * 1000


async def main(options: argparse.Namespace) -> None:
    print(
        f"bench_process: n={options.n} trivial tasks, {options.workers} workers "
        f"({options.start_method}), {options.stops} stops, best of {options.rounds}"
    )
    await throughput(options.n, options.workers, options.start_method, options.rounds)
    await stop_latency(options.stops, options.start_method)
    await cpu_bound(options.workers, options.start_method, options.size)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--stops", type=int, default=200)
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--start-method", choices=["spawn", "forkserver"], default="spawn")
    asyncio.run(main(parser.parse_args()))
