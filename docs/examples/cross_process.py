"""Cross-process control: one process runs tasks, another sees and controls them.

    python docs/examples/cross_process.py [DB]

The script starts a copy of itself as the worker process (``worker-1``) on a
shared SQLite file, then acts as the ops console: a controller that holds no
task of its own. It lists the worker's tasks from the store, stops one of
them with a reason (a command the worker claims and applies), and prints that
task's history as the store recorded it. Swap the path for a
``postgresql://`` DSN and nothing else changes.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from chongming import Controller, TaskContext, TaskStatus, render_table

WORKER_READY = "worker-1 ready"


async def sync(ctx: TaskContext, tenant: str) -> str:
    """A long job that checkpoints: where a stop (or a pause) takes effect."""
    for _ in range(60_000):
        await ctx.checkpoint()
        await asyncio.sleep(0.01)
    return f"{tenant} synced"


async def worker(db: str) -> None:
    async with Controller(store=db, owner="worker-1", poll_interval=0.05) as controller:
        controller.register("sync", sync)
        jobs = [
            await controller.submit("sync", tenant, task_id=task_id, label=label, bucket_key=key)
            for task_id, tenant, label, key in (
                ("job-1", "A", "A-sync", "tenant-A"),
                ("job-2", "B", "B-sync", "tenant-B"),
            )
        ]
        while any(job.status is not TaskStatus.RUNNING for job in jobs):
            await asyncio.sleep(0.01)
        print(WORKER_READY, flush=True)
        for job in jobs:
            await job.wait()
        print("worker-1: " + ", ".join(f"{job.task_id} {job.status}" for job in jobs), flush=True)


async def ops_console(db: str) -> None:
    worker_process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--worker", db, stdout=asyncio.subprocess.PIPE
    )
    assert worker_process.stdout is not None
    try:
        line = (await worker_process.stdout.readline()).decode()
        assert line.strip() == WORKER_READY, line
        async with Controller(store=db, owner="ops-console") as console:
            print("--- what ops-console sees (it holds none of these tasks) ---")
            print(render_table(await console.list_tasks()))
            print(f"    task handles it holds: {(await console.stats()).held}")
            print()
            print(">>> ops-console stops job-1 across processes")
            issued = await console.stop("job-1", reason="release window")
            print(f"    request issued: {issued}")
            while (await console.get("job-1")).status is not TaskStatus.STOPPED:
                await asyncio.sleep(0.02)
            print("    worker-1 claimed the command and stopped the task")
            print()
            print("--- job-1's history (read from the store, auditable) ---")
            for step in await console.history("job-1"):
                print(
                    f"{step.version:>6}  {step.from_status.value:>10} -> "
                    f"{step.to_status.value:<10} by {step.trigger:<24} {step.reason or ''}".rstrip()
                )
            await console.stop("job-2", reason="end of demo")
        finished = (await worker_process.stdout.readline()).decode()
        print()
        print(finished.strip())
    finally:
        if worker_process.returncode is None:
            await asyncio.wait_for(worker_process.wait(), 30)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        asyncio.run(worker(sys.argv[2]))
        return
    if len(sys.argv) == 2:
        asyncio.run(ops_console(sys.argv[1]))
        return
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(ops_console(str(Path(directory) / "tasks.db")))


if __name__ == "__main__":
    main()
