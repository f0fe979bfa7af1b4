"""A node process for the cross-process tests: runs tasks on a shared store until told.

    python -m tests.control.node_main --db LOCATION [--schema S] --owner A --tasks N

Prints ``ack <id>`` as each submit returns (the task is durable then),
``ready`` once the first ``--max-parallel`` tasks are running, then one JSON
line (outcomes, and the tasks it let go) when all have ended, and exits 0.
Each task loops at checkpoints until it is stopped (or, with
``--finish-after``, returns after that many seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from chongming import Controller, TaskStatus
from chongming.policies import ControlWindows
from chongming.stores.base import TaskStore


async def loops(ctx: Any, finish_after: float) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + finish_after
    while loop.time() < deadline:
        await ctx.checkpoint()
        await asyncio.sleep(0.005)
    return "finished"


def make_store(location: str, schema: str | None) -> TaskStore | str:
    if schema is None:
        return location
    from chongming.stores.postgres import PostgresTaskStore

    return PostgresTaskStore(location, schema=schema)


async def main(options: argparse.Namespace) -> int:
    store = make_store(options.db, options.schema)
    windows = ControlWindows(stop_grace=1.0, cancel_window=0.5, pause_window=5.0)
    async with Controller(
        store=store,
        owner=options.owner,
        max_parallel=options.max_parallel or max(options.tasks, 1),
        windows=windows,
        poll_interval=options.poll_interval,
        lease_ttl=options.lease_ttl,
    ) as controller:
        controller.register("loops", loops)
        runs = []
        for i in range(options.tasks):
            task_id = f"{options.prefix}{i}"
            runs.append(await controller.submit("loops", options.finish_after, task_id=task_id))
            print(f"ack {task_id}", flush=True)
        started = runs[: controller.limits.max_parallel]
        while any(run.status in (TaskStatus.QUEUED, TaskStatus.STARTING) for run in started):
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        outcomes = await controller.wait_all()
        let_go = sorted(task_id for task_id, _ in controller.persist_failures.let_go)
        report = {"outcomes": {o.task_id: o.status.value for o in outcomes}, "let_go": let_go}
        print(json.dumps(report), flush=True)
        if not isinstance(store, str):
            await controller.close(close_store=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--schema")
    parser.add_argument("--owner", required=True)
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--max-parallel", type=int, default=0)
    parser.add_argument("--prefix", default="job-")
    parser.add_argument("--finish-after", type=float, default=3600.0)
    parser.add_argument("--poll-interval", type=float, default=0.05)
    parser.add_argument("--lease-ttl", type=float, default=30.0)
    sys.exit(asyncio.run(main(parser.parse_args())))
