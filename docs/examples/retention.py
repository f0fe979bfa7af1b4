"""Retention: the order service's worker keeps finished orders 7 days, failed ones 30.

Run it: ``python docs/examples/retention.py``. A client whose clock runs
behind plays the past: orders shipped 40 and 3 days ago, one that failed 10
days ago, one that failed 40 days ago. The worker (in production:
``chongming worker --tasks orders_tasks --retention 7d --retention-failed 30d``)
prunes in the background from its start; what is left is what the operator
asked to keep. ``chongming prune --older-than 7d --dry-run`` counts the same
without a worker.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chongming import Controller, Retention, TaskContext, TaskQuery
from chongming.stores.retention import selections

DAY = 86_400.0


class DaysAgo:
    """A clock that runs ``days`` behind: what the client records happened then."""

    def __init__(self, days: float) -> None:
        self.offset = days * DAY

    def time(self) -> float:
        return time.time() - self.offset


async def ship(ctx: TaskContext, order: str, fail: bool = False) -> str:
    if fail:
        raise RuntimeError(f"carrier refused {order}")
    return f"{order} shipped"


#: The order service operator's setting.
RETENTION = Retention(terminal=timedelta(days=7), failed=timedelta(days=30))


async def past(db: Path, days: float, order: str, *, fail: bool = False) -> None:
    """Ship ``order`` as if it were ``days`` ago."""
    async with Controller(store=db, owner=f"then-{order}", clock=DaysAgo(days)) as client:
        client.register("ship", ship)
        run = await client.submit("ship", order, fail=fail, task_id=order)
        await run.wait()


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "orders.db"
        await past(db, 40, "order-1")  # shipped 40 days ago: goes
        await past(db, 3, "order-2")  # shipped 3 days ago: stays
        await past(db, 10, "order-3", fail=True)  # failed 10 days ago: stays (30 days)
        await past(db, 40, "order-4", fail=True)  # failed 40 days ago: goes
        async with Controller(store=db, owner="reader") as reader:
            store = reader.store
            assert store is not None
            names = sorted(s.task_id for s in await reader.list_tasks(TaskQuery()))
            print(f"stored: {', '.join(names)}")
            now = datetime.now(UTC)
            due = sum([await store.count_prunable(rule) for rule in selections(RETENTION, now)])
            print(f"due for pruning: {due}")

        worker = Controller(store=db, owner="worker-1", work=True, retention=RETENTION)
        async with worker:
            worker.register("ship", ship)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while len(await worker.list_tasks(TaskQuery())) > 2:  # its first round, at start
                assert loop.time() < deadline, "the worker did not prune"
                await asyncio.sleep(0.05)
            kept = sorted(s.task_id for s in await worker.list_tasks(TaskQuery()))
        print(f"kept after the worker's prune: {', '.join(kept)}")


if __name__ == "__main__":
    asyncio.run(main())
