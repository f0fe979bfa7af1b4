"""A cluster-wide limit: two workers on one store never run more than 2 vendor calls at once.

Run it: ``python docs/examples/cluster_limits.py``. Both workers live in this
process to keep the example short; in production each is its own process or
machine (``chongming worker --tasks ... --cluster-limit vendor-api=2``).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from chongming import Controller, TaskContext

running = 0
peak = 0


async def push_invoice(ctx: TaskContext, invoice: int) -> str:
    global running, peak
    running += 1
    peak = max(peak, running)
    try:
        await asyncio.sleep(0.05)  # the vendor's API, slow and rate limited
        await ctx.checkpoint()
    finally:
        running -= 1
    return f"invoice {invoice} pushed"


def worker(db: Path, name: str) -> Controller:
    node = Controller(
        store=db,
        owner=name,
        work=True,
        max_parallel=4,
        cluster_limits={"vendor-api": 2},
        poll_interval=0.05,
    )
    node.register("push-invoice", push_invoice, tags=("vendor-api",))
    return node


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "tasks.db"
        async with Controller(store=db, owner="web") as client:
            queued = [await client.enqueue("push-invoice", n) for n in range(8)]
            async with worker(db, "worker-a"), worker(db, "worker-b"):
                while running < 2:
                    await asyncio.sleep(0.005)
                (limit,) = await client.store.cluster_limits()  # type: ignore[union-attr]
                print(f"limit {limit.name}: capacity {limit.capacity}, held {limit.held}")
                finals = [await task.wait(timeout=30) for task in queued]
            print(f"{sum(f.status.value == 'succeeded' for f in finals)} of 8 succeeded")
            print(f"peak running across both workers: {peak}")
            (limit,) = await client.store.cluster_limits()  # type: ignore[union-attr]
            print(f"after both workers closed: held {limit.held}")


if __name__ == "__main__":
    asyncio.run(main())
