"""Worker pools: payments run only on the payments workers, everything else on the rest.

Run it: ``python docs/examples/pools.py``. Both workers live in this process
to keep the example short; in production each is its own process or machine:

    chongming worker --tasks shop.tasks --tags payments             # the payments pool
    chongming worker --tasks shop.tasks --exclude-tags payments     # the rest of the fleet

The order's parent enqueues its payment one priority above itself and waits
for it parked, so a flood of new orders never starves the payments of the
orders already under way (docs/pools.md).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from chongming import Controller, TaskContext
from chongming.controller.pools import WorkerPool

CLIENT: list[Controller] = []


async def place_order(ctx: TaskContext, order: int) -> Any:
    async def enqueue_payment() -> str:
        queued = await CLIENT[0].enqueue(
            "charge", ctx.task_id, order, priority=1, idempotency_key=f"charge:{order}"
        )
        return queued.task_id

    await ctx.step("enqueue payment", enqueue_payment)
    return await ctx.wait_for_fact("charged")  # parked off its slot until the payment says so


async def charge(ctx: TaskContext, parent: str, order: int) -> str:
    await CLIENT[0].signal(parent, "charged", f"order {order} paid")
    return "paid"


def worker(db: Path, name: str, pool: WorkerPool) -> Controller:
    node = Controller(
        store=db, owner=name, work=True, max_parallel=2, poll_interval=0.05, pool=pool
    )
    register(node)
    return node


def register(controller: Controller) -> None:
    controller.register("place-order", place_order, durable=True)
    controller.register("charge", charge, tags=("payments",))


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "tasks.db"
        async with Controller(store=db, owner="web") as client:
            CLIENT[:] = [client]
            register(client)  # so an enqueue stores each registration's tags with the task
            orders = [await client.enqueue("place-order", n) for n in range(6)]
            payments = worker(db, "payments-1", WorkerPool(tags=["payments"]))
            general = worker(db, "general-1", WorkerPool(exclude_tags=["payments"]))
            async with payments, general:
                finals = [await order.wait(timeout=30) for order in orders]
            ran: dict[str, set[str]] = {}
            for snapshot in await client.list_tasks():
                ran.setdefault(snapshot.name, set()).add(str(snapshot.owner))
        print("orders:", ", ".join(str(final.result) for final in finals[:2]), "...")
        print(f"{sum(final.status.value == 'succeeded' for final in finals)} of 6 orders done")
        for name in sorted(ran):
            print(f"{name} ran on: {', '.join(sorted(ran[name]))}")


if __name__ == "__main__":
    asyncio.run(main())
