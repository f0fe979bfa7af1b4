"""The work behind docs/examples/orders_service.py, for ``chongming worker``.

A worker process imports this module and registers what it defines; the web
service registers nothing (it only enqueues by name). Run it from this
directory, on the database the service uses::

    chongming --db orders.db worker --tasks orders_tasks --max-parallel 8

(or ``--db postgresql://app@db/shop``). SIGTERM stops it gracefully: it stops
claiming, lets running shipments finish, and leaves the rest queued.
"""

from __future__ import annotations

import asyncio

from chongming import Controller, TaskContext


async def ship_order(ctx: TaskContext, order_id: str, item: str, quantity: int) -> str:
    """Book the parcel with the carrier (a short sleep here); the label is the result."""
    await asyncio.sleep(0.01)
    await ctx.checkpoint()
    return f"label for {order_id}: {quantity} x {item}"


def register(controller: Controller) -> None:
    controller.register("ship-order", ship_order)
