"""Quick start: run one sync task and print its auditable trajectory.

Run it with ``python docs/examples/quickstart.py`` (``make demo`` does this).

``extract`` is a plain ``def``, so it runs in a worker thread and calls the
blocking ``ctx.checkpoint()``. An ``async def`` task would write
``await ctx.checkpoint()`` instead (see docs/writing-tasks.md).
"""

from __future__ import annotations

import asyncio
import time

from chongming import TaskContext, TaskRun


def extract(ctx: TaskContext, source: str) -> list[int]:
    """Long loops must call ctx.checkpoint() regularly."""
    rows: list[int] = []
    for index in range(5):
        ctx.checkpoint()  # honours stop and pause, refreshes the heartbeat
        time.sleep(0.05)
        rows.append(index)
    print(f"  extracted {source} -> {len(rows)} rows")
    return rows


async def main() -> None:
    async with TaskRun(extract, ("s3://demo/rows",), task_id="demo-1", label="extract") as run:
        outcome = await run.wait(timeout=30)

    print()
    print("State history (append-only, auditable):")
    for record in run.transitions:
        print(f"{record.from_status.value:>10} -> {record.to_status.value:<10} by {record.trigger}")

    print()
    print(f"final status: {outcome.status.value}")
    print(f"value       : {outcome.value}")
    print(f"elapsed     : {outcome.elapsed:.2f}s")


if __name__ == "__main__":
    asyncio.run(main())
