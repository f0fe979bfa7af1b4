"""Child tasks: the order's charge as a child, a fan-out of shipments, a declined card.

Run it: ``python docs/examples/children.py``. A client enqueues orders; one
worker with ONE slot runs them. Each order is a durable parent that:

1. charges the card with ``await ctx.child("charge", ...)`` — a child task any
   worker may run, enqueued once however often the parent is replayed, its
   result (or a :class:`~chongming.ChildFailed`) returned to the parent;
2. fans out one ``ship-item`` child per item with ``ctx.spawn`` and collects
   the labels with ``ctx.gather`` (in item order).

While it waits, the parent parks off its slot — with one slot, that is what
lets its own children run at all. No module global holds the controller: the
task reaches its plane through ``ctx``. Compare docs/examples/pools.py, where
the same charge is hand-built from a step, an enqueue, a signal and a fact.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from chongming import ChildFailed, Controller, TaskContext


async def charge(ctx: TaskContext, order: str, cents: int) -> str:
    """The payment provider (pretend): a card over 100.00 is declined."""
    await ctx.checkpoint()
    if cents > 10_000:
        raise ValueError(f"card declined for {cents / 100:.2f}")
    return f"receipt {order}"


async def ship_item(ctx: TaskContext, order: str, item: str) -> str:
    await ctx.checkpoint()
    return f"label {order}/{item}"


async def place_order(ctx: TaskContext, order: str, cents: int, items: list[str]) -> Any:
    try:
        receipt = await ctx.child("charge", order, cents)
    except ChildFailed as declined:  # the child's id, status and failure text
        return {"order": order, "declined": declined.message}
    shipments = [await ctx.spawn("ship-item", order, item) for item in items]
    labels = await ctx.gather(*shipments)  # every result, in handle order
    return {"order": order, "receipt": receipt, "labels": labels}


def register(controller: Controller) -> None:
    controller.register("place-order", place_order, durable=True)
    controller.register("charge", charge)
    controller.register("ship-item", ship_item)


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "shop.db"
        async with Controller(store=db, owner="web") as client:
            register(client)
            orders = [
                await client.enqueue("place-order", "A-1", 2_500, ["mug", "tea"]),
                await client.enqueue("place-order", "A-2", 25_000, ["sofa"]),
            ]
            worker = Controller(store=db, owner="worker-1", work=True, max_parallel=1)
            register(worker)
            async with worker:
                finals = [await order.wait(timeout=30) for order in orders]
            for final in finals:
                print(final.status.value, final.result)
            store = client.store
            assert store is not None
            children = await store.children_of(orders[0].task_id)
            names = sorted([(await client.get(child)).name for child in children])
            print("children of A-1:", ", ".join(names))
            print(
                "parent named by each:",
                {await store.parent_of(c) for c in children} == {orders[0].task_id},
            )


if __name__ == "__main__":
    asyncio.run(main())
