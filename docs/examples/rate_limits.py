"""A cluster-wide rate limit: two workers on one store start at most 5 payment calls a second.

Run it: ``python docs/examples/rate_limits.py``. Both workers live in this
process to keep the example short; in production each is its own process or
machine (``chongming worker --tasks ... --rate-limit payment-vendor=5/s``).
Reports, which carry no limited tag, run beside the payments and are never
queued behind them.
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import datetime
from pathlib import Path

from chongming import Controller, TaskContext, TaskStatus


async def charge(ctx: TaskContext, order: int) -> str:
    await ctx.checkpoint()  # the payment vendor's API: 5 calls a second, for the whole fleet
    return f"order {order} charged"


async def report(ctx: TaskContext, day: int) -> str:
    return f"report {day} written"


def worker(db: Path, name: str) -> Controller:
    node = Controller(
        store=db,
        owner=name,
        work=True,
        max_parallel=4,
        rate_limits={"payment-vendor": "5/s"},  # also "300/min", "5/s burst 10", RateLimit(...)
        poll_interval=0.05,
    )
    node.register("charge", charge, tags=("payment-vendor",))
    node.register("report", report)
    return node


async def started_at(client: Controller, task_id: str) -> datetime:
    history = await client.history(task_id)
    return next(t.at for t in history if t.to_status is TaskStatus.RUNNING)


def most_in_one_second(starts: list[datetime]) -> int:
    times = sorted(start.timestamp() for start in starts)
    return max(sum(1 for t in times if first <= t < first + 1.0) for first in times)


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "tasks.db"
        async with Controller(store=db, owner="web") as client:
            payments = [await client.enqueue("charge", n) for n in range(11)]
            reports = [await client.enqueue("report", n) for n in range(4)]
            async with worker(db, "worker-a"), worker(db, "worker-b"):
                report_finals = [await task.wait(timeout=30) for task in reports]
                finals = [await task.wait(timeout=30) for task in payments]
            starts = [await started_at(client, task.task_id) for task in payments]
            report_starts = [await started_at(client, task.task_id) for task in reports]
            limit = (await client.store.rate_limits())["payment-vendor"]  # type: ignore[union-attr]
        print(f"rate limit payment-vendor: {limit}")
        print(f"{sum(f.status is TaskStatus.SUCCEEDED for f in finals)} of 11 payments succeeded")
        reports_ok = sum(f.status is TaskStatus.SUCCEEDED for f in report_finals)
        print(f"{reports_ok} of 4 reports succeeded")
        ahead = max(report_starts) < sorted(starts)[5]
        print("every report started before the 6th payment:", "yes" if ahead else "no")
        peak = most_in_one_second(starts)
        print("payment starts in any one second:", "at most 6" if peak <= 6 else peak)
        spread = (max(starts) - min(starts)).total_seconds()
        print(
            "11 starts spread over about 2 s:", "yes" if spread >= 1.8 else f"no ({spread:.2f} s)"
        )


if __name__ == "__main__":
    asyncio.run(main())
