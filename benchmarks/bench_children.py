"""Fan-out of N child tasks and gather, vs the same N tasks enqueued directly and awaited.

Both sides run on one SQLite file with one worker (``max_parallel`` slots) in
this process. ``children``: one durable parent spawns N ``trivial`` children
(``ctx.spawn``, a memoised enqueue each) and gathers them (``ctx.gather``:
each end is a fact written in the child's terminal transaction; the parent
parks until the next child it waits for ends). ``as_completed``: the same
parent takes the ends as they come (``ctx.as_completed``). ``direct``: a client
enqueues the same N tasks and awaits each ``QueuedTask.wait``. The ratio is
direct / children throughput (the issue asks for >= 0.5x, i.e. a ratio <= 2).
The client looks for results every 10 ms, like the worker polls (SQLite has
no NOTIFY): at the default second both sides would end on a poll tick.

Run: ``.venv/bin/python benchmarks/bench_children.py`` (``--n 200`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from chongming import Controller


async def trivial(ctx: Any, n: int) -> int:
    return n


async def fan(ctx: Any, count: int) -> int:
    handles = [await ctx.spawn("trivial", n) for n in range(count)]
    results = await ctx.gather(*handles)
    return sum(results)


async def fan_any(ctx: Any, count: int) -> int:
    handles = [await ctx.spawn("trivial", n) for n in range(count)]
    total = 0
    async for end in ctx.as_completed(*handles):
        total += end.result()
    return int(total)


def _register(controller: Controller) -> None:
    controller.register("trivial", trivial)
    controller.register("fan", fan, durable=True)
    controller.register("fan_any", fan_any, durable=True)


def _worker(db: Path, slots: int) -> Controller:
    worker = Controller(store=db, owner="worker", work=True, max_parallel=slots, poll_interval=0.01)
    _register(worker)
    return worker


async def children(db: Path, count: int, slots: int, parent_task: str = "fan") -> float:
    async with Controller(store=db, owner="client", poll_interval=0.01) as client:
        _register(client)
        async with _worker(db, slots):
            started = time.perf_counter()
            parent = await client.enqueue(parent_task, count)
            final = await parent.wait(timeout=600)
            elapsed = time.perf_counter() - started
        assert final.result == count * (count - 1) // 2, final
    return elapsed


async def direct(db: Path, count: int, slots: int) -> float:
    async with Controller(store=db, owner="client", poll_interval=0.01) as client:
        _register(client)
        async with _worker(db, slots):
            started = time.perf_counter()
            queued = [await client.enqueue("trivial", n) for n in range(count)]
            finals = [await task.wait(timeout=600) for task in queued]
            elapsed = time.perf_counter() - started
        assert sum(int(str(final.result)) for final in finals) == count * (count - 1) // 2
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians)")
    options = parser.parse_args()
    n = options.n
    times: dict[str, list[float]] = {"fan": [], "fan_any": [], "direct": []}
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for round_ in range(options.rounds):  # interleaved: the machine's load hits all three
            for side in times:
                db = root / f"{side}-{round_}.db"
                if side == "direct":
                    times[side].append(await direct(db, n, options.slots))
                else:
                    times[side].append(await children(db, n, options.slots, side))
    fan_out, fan_any_out, baseline = (statistics.median(times[side]) for side in times)
    ratios = [d / f for d, f in zip(times["direct"], times["fan"], strict=True)]
    print(f"children: {n} spawned + gathered in {fan_out:.2f} s (median of {options.rounds}; "
          f"{n / fan_out:.0f} children/s)")  # fmt: skip
    print(f"as_completed: {n} spawned + taken as they ended in {fan_any_out:.2f} s "
          f"({n / fan_any_out:.0f} children/s)")  # fmt: skip
    print(f"direct:   {n} enqueued + awaited in {baseline:.2f} s ({n / baseline:.0f} tasks/s)")
    print(f"children throughput / direct throughput: {baseline / fan_out:.2f}x "
          f"(each round: {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
    print(f"as_completed throughput / direct throughput: {baseline / fan_any_out:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
