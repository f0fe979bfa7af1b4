"""``Controller(cluster_limits=...)``: a cap on tagged tasks shared by every node on a store."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.sqlite import SqliteTaskStore
from tests.conftest import FAST


class Meter:
    """How many tasks with the tag run at once, at most, across every controller here."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.started = 0

    async def run(self, ctx: Any, hold: float) -> None:
        self.now += 1
        self.started += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(hold)
            await ctx.checkpoint()
        finally:
            self.now -= 1


def _node(db: Path, owner: str, meter: Meter, **options: Any) -> Controller:
    node = Controller(
        store=db,
        owner=owner,
        cluster_limits={"api": 2},
        poll_interval=0.05,
        windows=FAST,
        **options,
    )
    node.register("call_api", meter.run, tags=("api",))
    node.register("plain", meter.run)
    return node


async def test_two_nodes_never_run_more_than_the_fleet_limit(tmp_path: Path) -> None:
    db, meter = tmp_path / "q.db", Meter()
    async with _node(db, "node-a", meter, max_parallel=5) as a, _node(db, "node-b", meter) as b:
        runs = [await node.submit("call_api", 0.02) for node in (a, b) for _ in range(8)]
        finals = [await run.wait() for run in runs]
        stats = await a.stats()
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 16
    assert meter.started == 16
    assert meter.peak == 2  # reached, never passed
    assert stats.cluster_slots == {"api": 0}  # nothing waits or runs: every slot went back
    async with SqliteTaskStore(db) as store:
        (limit,) = await store.cluster_limits()
    assert (limit.name, limit.capacity, limit.held) == ("api", 2, 0)


async def test_untagged_work_passes_tasks_that_wait_for_a_cluster_slot(tmp_path: Path) -> None:
    db, meter = tmp_path / "q.db", Meter()
    gate = asyncio.Event()

    async def held(ctx: Any) -> None:
        await gate.wait()

    async with _node(db, "node-a", meter, max_parallel=4) as node:
        node.register("held_api", held, tags=("api",))
        blockers = [await node.submit("held_api") for _ in range(3)]
        plain = await node.submit("plain", 0.0)
        assert (await plain.wait()).status is TaskStatus.SUCCEEDED  # not stuck behind them
        statuses = sorted(run.status.value for run in blockers)
        assert statuses == ["queued", "running", "running"]
        assert (await node.stats()).cluster_slots == {"api": 2}
        gate.set()
        assert {(await run.wait()).status for run in blockers} == {TaskStatus.SUCCEEDED}


async def test_workers_claiming_from_one_queue_share_the_limit(tmp_path: Path) -> None:
    db, meter = tmp_path / "q.db", Meter()
    workers = [_node(db, f"worker-{n}", meter, work=True, max_parallel=3) for n in range(3)]
    async with Controller(store=db, owner="client") as client:
        queued = [await client.enqueue("call_api", 0.02) for _ in range(24)]
        for worker in workers:
            await worker.start()
        try:
            finals = [await task.wait(timeout=30) for task in queued]
        finally:
            for worker in workers:
                await worker.close()
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 24
    assert meter.peak <= 2
    assert meter.started == 24


async def test_the_stores_capacity_wins_over_a_different_declaration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "q.db"
    async with SqliteTaskStore(db) as store:
        await store.set_cluster_limit("api", 1)
    meter = Meter()
    with caplog.at_level(logging.WARNING, logger="chongming.control"):
        async with _node(db, "node-a", meter, max_parallel=5) as node:
            runs = [await node.submit("call_api", 0.01) for _ in range(4)]
            for run in runs:
                await run.wait()
    assert meter.peak == 1
    assert "cluster limit 'api' is 1 in the store (this node declared 2)" in caplog.text


@pytest.mark.parametrize(
    ("limits", "problem"),
    [
        (["api"], "must be a mapping"),
        ({"": 1}, "cluster limit name"),
        ({"a\x00": 1}, "cluster limit name"),
        ({"x" * 10_000: 1}, "cluster limit name"),
        ({"api": 0}, "capacity"),
        ({"api": True}, "capacity"),
        ({"api": "3"}, "capacity"),
    ],
)
def test_bad_cluster_limits_are_refused_when_the_controller_is_built(
    tmp_path: Path, limits: Any, problem: str
) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        Controller(store=tmp_path / "q.db", cluster_limits=limits)
    assert not (tmp_path / "q.db").exists()  # nothing written, not even the file


def test_cluster_limits_need_a_store_that_has_them() -> None:
    with pytest.raises(ConfigurationError, match="need a store shared by the fleet"):
        Controller(cluster_limits={"api": 2})

    class NoLimits(InMemoryTaskStore):
        lease_cluster_slots = TaskStore.lease_cluster_slots  # the port's default: none

    with pytest.raises(ConfigurationError, match="NoLimits has no cluster-wide limits"):
        Controller(store=NoLimits(), cluster_limits={"api": 2})
