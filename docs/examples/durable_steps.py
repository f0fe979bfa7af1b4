"""Durable steps: a retried attempt replays what the first one finished.

Run it: ``python docs/examples/durable_steps.py``. A worker runs a three-step
import; its first attempt dies after two steps (a flaky network, here a
raised error), and the retry replays those two from the store without running
them again, then runs the third.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskContext

calls: list[str] = []


async def download(url: str) -> dict[str, int]:
    calls.append(f"download {url}")
    return {"bytes": 4096}


def checksum(size: int) -> str:
    calls.append("checksum")  # a plain function: it runs in a worker thread
    return f"sha256:{size:08x}"


async def import_file(ctx: TaskContext, url: str) -> dict[str, object]:
    fetched = await ctx.step("download", download, url)
    digest = await ctx.step("checksum", checksum, fetched["bytes"])
    if ctx.attempt == 1:
        raise ConnectionError("the network dropped after two steps")
    stored = await ctx.step("store", download, url + "#copy")
    return {"digest": digest, "stored": stored["bytes"]}


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "tasks.db"
        async with Controller(store=db, owner="web") as client:
            queued = await client.enqueue("import-file", "https://example.test/a.bin")
            worker = Controller(store=db, owner="worker-1", work=True, poll_interval=0.05)
            retry = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
            worker.register("import-file", import_file, durable=True, retry=retry)
            async with worker:
                final = await queued.wait(timeout=30)
            assert client.store is not None
            steps = await client.store.steps(final.task_id)
        print(f"status {final.status.value} after {final.attempt} attempts: {final.result}")
        print("step bodies that ran:", ", ".join(calls))
        print("recorded steps:", ", ".join(f"{s.name}@epoch{s.epoch}" for s in steps))


if __name__ == "__main__":
    asyncio.run(main())
