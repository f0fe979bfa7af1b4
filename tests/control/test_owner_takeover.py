"""A worker restarted under its old owner name after a SIGKILL takes the lease over (issue 22, 14).

Before: the restart failed "already held by a live node (host 'vm', pid N)"
although pid N was dead, and a supervisor restarting with a fixed name
crash-looped for ``lease_ttl``. Now, on the same host with the recorded
process gone, the new node takes the lease; a live holder still refuses it,
saying until when its lease runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, NodeConflict, TaskStatus
from chongming.plane.takeover import holder_is_gone

ROOT = Path(__file__).resolve().parents[2]

HOLDER = """
import asyncio, os, socket, sys
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.nodes import NodeInfo

async def main():
    async with SqliteTaskStore(sys.argv[1]) as store:
        info = NodeInfo(owner="fixed", incarnation=os.urandom(8).hex(),
                        host=socket.gethostname(), pid=os.getpid(), version="1", num_buckets=64)
        await store.register_node(info, ttl_seconds=3600)
        print("registered", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


async def quick(ctx: Any) -> str:
    return "ok"


@asynccontextmanager
async def _holder(db: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HOLDER,
        str(db),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=30)
        assert line.decode().strip() == "registered", line
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def test_a_restart_under_the_name_of_a_killed_process_takes_the_lease(
    tmp_path: Path,
) -> None:
    db = tmp_path / "q.db"
    async with _holder(db) as holder:
        holder.send_signal(signal.SIGKILL)  # no release: the row stays leased for an hour
        await holder.wait()
        async with Controller(store=db, owner="fixed", poll_interval=0.05) as restarted:
            restarted.register("quick", quick)
            run = await restarted.submit("quick")  # registers the node: no NodeConflict
            assert (await run.wait(timeout=10)).status is TaskStatus.SUCCEEDED
            [node] = await restarted.nodes()
            assert (node.info.pid, node.live) == (os.getpid(), True)


async def test_a_live_holder_still_refuses_and_says_until_when(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with _holder(db) as holder, Controller(store=db, owner="fixed") as second:
        second.register("quick", quick)
        with pytest.raises(NodeConflict) as caught:
            await second.submit("quick")
        assert caught.value.pid == holder.pid
        assert caught.value.lease_expires_at is not None
        assert "unless it renews" in str(caught.value)


def test_who_counts_as_gone() -> None:
    here, now = socket.gethostname(), datetime.now(UTC)
    assert not holder_is_gone("another-host", 999_999_999, "x", now)
    assert not holder_is_gone(here, os.getppid(), "x", now)  # alive
    # this very pid, an incarnation no node of this process holds: a restarted container
    assert holder_is_gone(here, os.getpid(), "not-ours", now)
    if sys.platform == "linux":
        # pid 1 started long before "now + 1 h": not a reused pid, so alive
        assert not holder_is_gone(here, 1, "x", now + timedelta(hours=1))
