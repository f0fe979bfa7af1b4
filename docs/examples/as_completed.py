"""ctx.as_completed: ask three suppliers for a quote, use each answer as it comes.

Run it: ``python docs/examples/as_completed.py``. A client enqueues one
``best-quote`` task; a worker with two slots runs it. The parent spawns one
``quote`` child per supplier and handles each end as it comes: a supplier
that fails is noted, not fatal. Between ends the parent parks off its slot.

Which children ended together, and in what order the loop saw them, is
recorded once (``children:any`` steps): a retry or a resumed attempt sees the
same ends in the same order, whatever has ended since.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from chongming import Controller, TaskContext

PRICES = {"north": 1_250, "east": 990, "west": None}  # west is down today


async def quote(ctx: TaskContext, supplier: str) -> int:
    """The supplier's price in cents (pretend); a supplier that is down fails."""
    await ctx.checkpoint()
    price = PRICES[supplier]
    if price is None:
        raise ConnectionError(f"{supplier} did not answer")
    return price


async def best_quote(ctx: TaskContext, suppliers: list[str]) -> Any:
    handles = [await ctx.spawn("quote", name) for name in suppliers]
    heard: list[str] = []
    best: tuple[int, str] | None = None
    async for end in ctx.as_completed(*handles):
        supplier = suppliers[handles.index(end.handle)]
        if not end.ok:  # end.result() would raise ChildFailed
            heard.append(f"{supplier}: {end.status} ({end.message})")
            continue
        heard.append(f"{supplier}: {end.value}")
        if best is None or end.value < best[0]:
            best = (end.value, supplier)
    return {"heard": heard, "best": best}


def register(controller: Controller) -> None:
    controller.register("best-quote", best_quote, durable=True)
    controller.register("quote", quote)


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "quotes.db"
        async with Controller(store=db, owner="web") as client:
            register(client)
            task = await client.enqueue("best-quote", list(PRICES))
            worker = Controller(store=db, owner="worker-1", work=True, max_parallel=2)
            register(worker)
            async with worker:
                final = await task.wait(timeout=30)
            print(final.status.value)
            for line in final.result["heard"]:
                print("heard", line)
            print("best", final.result["best"])
            # The order the loop saw, as the journal keeps it for a replay.
            store = client.store
            assert store is not None
            seen = []
            for step in await store.steps(task.task_id):
                if step.name == "children:any":  # a list of "child:<id>" facts
                    for fact in step.value:
                        child = await client.get(fact.removeprefix("child:"))
                        seen.append(child.args[0])
            print("recorded order:", ", ".join(seen))


if __name__ == "__main__":
    asyncio.run(main())
