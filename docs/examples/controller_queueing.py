"""Managing a batch: over the limit means queued, never rejected.

Four tasks, ``max_parallel=2``: two run, two wait in ``queued`` (their
ELAPSED shows ``-`` because they have not run yet). One is stopped by hand;
``stop_all`` would return how many requests it issued, not how many stopped.
"""

from __future__ import annotations

import asyncio
import time

from chongming import Controller, TaskQuery, TaskStatus, render_table


def transform(ctx, rows: int) -> int:  # type: ignore[no-untyped-def]
    """A sync task: runs in a worker thread and checkpoints as it goes."""
    for step in range(1, 41):
        ctx.checkpoint()
        time.sleep(0.01)
        ctx.progress(step, total=40)
    return rows


async def main() -> None:
    async with Controller(max_parallel=2) as controller:
        controller.register("transform", transform, tags={"io"})
        for index, rows in enumerate((100, 200, 300, 400)):
            await controller.submit(
                "transform", rows, task_id=f"t{index}", label=f"转换-{index + 1}"
            )

        running = frozenset({TaskStatus.RUNNING})
        while len(await controller.list_tasks(TaskQuery(statuses=running))) < 2:
            await asyncio.sleep(0.01)
        print("--- while running: the limit is 2 ---")
        print(render_table(await controller.list_tasks()))

        issued = await controller.stop("t0", reason="manual intervention")
        print(f"\nstop t0 -> request issued: {issued}")
        outcomes = await controller.wait_all(timeout=60)

        print("\n--- at the end ---")
        for outcome in outcomes:
            print(f"{outcome.task_id}  {outcome.status.value:<9}  value={outcome.value}")
        stats = await controller.stats()
        print(f"by status: {dict(sorted(stats.by_status.items()))}")


if __name__ == "__main__":
    asyncio.run(main())
