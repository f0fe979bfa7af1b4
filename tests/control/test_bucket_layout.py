"""What a default fleet owns, and which bucket layouts are misconfigured (issue 22, case 15).

Before: N workers started with the documented defaults (no
``owned_buckets``) made ``chongming buckets`` and the dashboard flag every
bucket "owned twice", although a shared pool of workers is the intended
layout (claims are atomic, reconcile writes compare).
"""

from __future__ import annotations

from typing import Any

import pytest

from chongming import ConfigurationError, Controller, InMemoryTaskStore
from chongming.cli.views import buckets_text
from chongming.scheduler.buckets import buckets_for_node


async def waits(ctx: Any) -> None:
    await ctx.checkpoint()


async def _nodes(store: InMemoryTaskStore, *layouts: dict[str, Any]) -> list[Controller]:
    nodes = []
    for i, layout in enumerate(layouts):
        node = Controller(store=store, owner=f"n-{i}", work=True, poll_interval=0.05, **layout)
        await node.start()
        nodes.append(node)
    return nodes


async def test_a_default_fleet_is_a_shared_pool_not_owned_twice() -> None:
    async with InMemoryTaskStore() as store:
        nodes = await _nodes(store, {}, {}, {})
        try:
            report = await nodes[0].bucket_report()
            assert report.owned_twice == []
            assert report.shared == ("n-0", "n-1", "n-2")
            assert report.mismatched == {}
            text = buckets_text(report, None)
            assert "owned twice: none" in text
            assert "OWNED TWICE" not in text
            assert "shared pool" in text
        finally:
            for node in nodes:
                await node.close()


async def test_overlapping_declared_ranges_and_bucket_counts_are_flagged() -> None:
    async with InMemoryTaskStore() as store:
        nodes = await _nodes(
            store,
            {"owned_buckets": range(40)},
            {"owned_buckets": range(32, 64)},
            {},  # a shared-pool node beside them overlaps nobody's partition
            {"num_buckets": 32},
        )
        try:
            report = await nodes[0].bucket_report()
            assert [row.bucket for row in report.owned_twice] == list(range(32, 40))
            assert report.mismatched == {"n-3": 32}
            row = next(row for row in report.rows if row.bucket == 35)
            assert row.ranged == ("n-0", "n-1")
            assert row.owners == ("n-0", "n-1", "n-2", "n-3")
            assert "num_buckets differs from 64" in buckets_text(report, None)
        finally:
            for node in nodes:
                await node.close()


async def test_a_fleet_partitioned_with_buckets_for_node_is_clean() -> None:
    async with InMemoryTaskStore() as store:
        layouts = [{"owned_buckets": buckets_for_node(i, 3, 64)} for i in range(3)]
        nodes = await _nodes(store, *layouts)
        try:
            report = await nodes[0].bucket_report()
            assert report.owned_twice == []
            assert report.shared == ()
            assert sorted(row.bucket for row in report.rows) == list(range(64))
        finally:
            for node in nodes:
                await node.close()


def test_buckets_for_node_partitions() -> None:
    shares = [buckets_for_node(i, 4, 64) for i in range(4)]
    assert shares == [range(16), range(16, 32), range(32, 48), range(48, 64)]
    uneven = [buckets_for_node(i, 3, 64) for i in range(3)]
    assert sorted(b for share in uneven for b in share) == list(range(64))
    assert {len(share) for share in uneven} <= {21, 22}
    for bad in [(4, 4, 64), (-1, 4, 64), (0, 0, 64), (0, 65, 64), (True, 2, 64)]:
        with pytest.raises(ConfigurationError):
            buckets_for_node(*bad)
