"""Throughput of ``run_task`` beside raw asyncio / anyio baselines in the same run.

    python benchmarks/bench_run.py [--n 20000] [--threads 2000]

Each measurement runs the baseline and chongming alternately (best of
``--rounds``) so that machine noise hits both; the ratio is what matters.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread

from chongming import run_task


async def trivial_async(ctx: object) -> int:
    return 1


def trivial_sync(ctx: object) -> int:
    return 1


def plain_sync() -> int:
    return 1


async def in_waves(n: int, parallel: int, one: Callable[[], Awaitable[object]]) -> None:
    """Run ``n`` calls, ``parallel`` at a time, as waves of tasks.

    Waves (not a semaphore) bound concurrency: asyncio's Semaphore wakes
    waiters in O(waiters) on Python 3.11, which would dominate both sides.
    """
    for start in range(0, n, parallel):
        count = min(parallel, n - start)
        tasks = [asyncio.ensure_future(one()) for _ in range(count)]
        for task in tasks:
            await task


async def raw_asyncio(n: int, parallel: int) -> None:
    async def one() -> int:
        return 1

    await in_waves(n, parallel, one)


async def chongming_async(n: int, parallel: int) -> None:
    async def one() -> None:
        outcome = await run_task(trivial_async)
        assert outcome.ok

    await in_waves(n, parallel, one)


async def raw_threads(n: int, parallel: int) -> None:
    async def one() -> int:
        return await anyio.to_thread.run_sync(plain_sync)

    await in_waves(n, parallel, one)


async def chongming_threads(n: int, parallel: int) -> None:
    async def one() -> None:
        outcome = await run_task(trivial_sync)
        assert outcome.ok

    await in_waves(n, parallel, one)


async def timed(fn: Callable[[int, int], Awaitable[None]], n: int, parallel: int) -> float:
    started = time.perf_counter()
    await fn(n, parallel)
    return n / (time.perf_counter() - started)


async def compare(
    label: str,
    baseline: Callable[[int, int], Awaitable[None]],
    subject: Callable[[int, int], Awaitable[None]],
    n: int,
    parallel: int,
    rounds: int,
    goal: str = "",
) -> dict[str, float]:
    base_best = subject_best = 0.0
    for _ in range(rounds):
        base_best = max(base_best, await timed(baseline, n, parallel))
        subject_best = max(subject_best, await timed(subject, n, parallel))
    ratio = subject_best / base_best
    print(
        f"{label:<34} baseline {base_best:>10,.0f}/s  chongming {subject_best:>10,.0f}/s"
        f"  ratio {ratio:.2f}x{goal}"
    )
    return {"baseline": base_best, "chongming": subject_best, "ratio": ratio}


async def main(n: int, threads: int, rounds: int) -> None:
    print(f"bench_run: n={n} async tasks, {threads} sync tasks, best of {rounds}")
    await compare(
        "run_task(async def) vs create_task",
        raw_asyncio,
        chongming_async,
        n,
        1000,
        rounds,
    )
    await compare(
        "run_task(def, thread) vs to_thread",
        raw_threads,
        chongming_threads,
        threads,
        40,
        rounds,
        " (goal >= 0.7)",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.n, options.threads, options.rounds))
