"""Nodes and the bucket report: two owners refused, misconfigurations named."""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import UTC, datetime
from typing import Any

import pytest

from chongming import Controller, InMemoryTaskStore, NodeConflict, TaskSnapshot, TaskStatus

S = TaskStatus


async def waits(ctx: Any) -> None:
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.01)


async def test_a_second_live_node_with_the_same_owner_is_refused() -> None:
    async with InMemoryTaskStore() as store, Controller(store=store, owner="node-a") as first:
        first.register("waits", waits)
        await first.submit("waits", task_id="one")
        async with Controller(store=store, owner="node-a") as second:
            second.register("waits", waits)
            with pytest.raises(NodeConflict) as caught:
                await second.submit("waits", task_id="two")
            assert caught.value.host == socket.gethostname()
            assert caught.value.pid == os.getpid()
            assert "node-a" in str(caught.value)
            assert await store.get("two") is None  # nothing written
            assert (await second.stats()).held == 0
        await first.stop("one")


async def test_nodes_lists_live_and_released_nodes() -> None:
    async with InMemoryTaskStore() as store:
        async with Controller(store=store, owner="node-a", owned_buckets=range(16)) as a:
            a.register("waits", waits)
            run = await a.submit("waits", bucket_key="tenant-A")
            (node,) = await a.nodes()
            assert (node.info.owner, node.live) == ("node-a", True)
            assert node.info.owned_buckets == frozenset(range(16))
            assert (node.info.host, node.info.pid) == (socket.gethostname(), os.getpid())
            await run.stop()
        async with Controller(store=store, owner="reader") as reader:
            (node,) = await reader.nodes()
            assert node.live is False  # a clean close releases the lease at once


async def test_the_bucket_report_names_double_owners_and_orphans() -> None:
    async with InMemoryTaskStore() as store:
        now = datetime.now(UTC)
        orphan = TaskSnapshot(
            task_id="orphan",
            name="n",
            label="n",
            status=S.QUEUED,
            status_version=1,
            attempt=0,
            max_attempts=1,
            created_at=now,
            updated_at=now,
            bucket=50,
            owner="ghost",
        )
        await store.create(orphan)
        async with (
            Controller(store=store, owner="a", owned_buckets=range(32)) as a,
            Controller(store=store, owner="b", owned_buckets=range(16, 48)) as b,
        ):
            for node in (a, b):
                node.register("waits", waits)
            held = await a.submit("waits", bucket_key="tenant-A")  # bucket 7
            b_run = await b.submit("waits", bucket_key="tenant-B")  # bucket 28
            report = await a.bucket_report()
            assert [row.bucket for row in report.owned_twice] == list(range(16, 32))
            assert [row.bucket for row in report.orphaned] == [50]
            rows = {row.bucket: row for row in report.rows}
            assert (rows[7].owners, rows[7].active) == (("a",), 1)
            assert (rows[28].owners, rows[28].active) == (("a", "b"), 1)
            await held.stop()
            await b_run.stop()
