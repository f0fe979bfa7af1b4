"""Await a task enqueued by name: its result, or ``TaskFailed``, from any node.

The web side enqueues two payments by name and awaits their results; a worker
(another process in production, here another controller on the same SQLite
file) runs them. One succeeds, one is declined: ``result()`` answers the value
of the first and raises ``TaskFailed`` for the second, with the task's status
and failure. On PostgreSQL the wait wakes at the commit that ended the task.

Run: ``python docs/examples/queued_result.py``
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from chongming import Controller, TaskContext, TaskFailed


async def charge(ctx: TaskContext, order: str, cents: int) -> dict[str, object]:
    if cents > 10_000:
        raise PermissionError(f"card declined for {cents} cents")
    return {"order": order, "charged": cents}


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "shop.db"
        async with Controller(store=db, owner="web", poll_interval=0.05) as web:
            small = await web.enqueue("charge", "A-1", 2_500)
            large = await web.enqueue("charge", "A-2", 25_000)
            worker = Controller(store=db, owner="worker-1", work=True, poll_interval=0.05)
            worker.register("charge", charge)
            async with worker:
                print("A-1:", await small.result(timeout=30))
                try:
                    await large.result(timeout=30)
                except TaskFailed as failed:
                    print(f"A-2: {failed.status} ({failed.error_type}: {failed.message})")


if __name__ == "__main__":
    asyncio.run(main())
