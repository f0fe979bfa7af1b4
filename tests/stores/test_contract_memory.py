"""The store contract against the in-memory reference store, on a fake clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from chongming.stores.base import TaskStore
from chongming.stores.memory import InMemoryTaskStore
from chongming.testing.store_contract import (
    ClusterLimitContract,
    EnqueueFactsContract,
    GrantedClaimContract,
    PoolClaimContract,
    RateLimitContract,
    RetentionContract,
    ScheduleContract,
    SpawnContract,
    StoreContract,
    TraceCarrierContract,
)


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = datetime(2026, 10, 2, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class TestInMemoryContract(
    StoreContract,
    ClusterLimitContract,
    SpawnContract,
    TraceCarrierContract,
    EnqueueFactsContract,
    RateLimitContract,
    PoolClaimContract,
    GrantedClaimContract,
    RetentionContract,
    ScheduleContract,
):
    # On a fake clock a long lease is as safe as a short one: only advance() moves time.
    wait_timeout = 0.5

    async def make_store(self) -> TaskStore:
        self.clock = ManualClock()
        return InMemoryTaskStore(clock=self.clock)

    async def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)


async def test_wait_command_hint_wakes_on_submit() -> None:
    from chongming.stores.nodes import Command, CommandKind

    store = InMemoryTaskStore()
    waiter = asyncio.create_task(store.wait_command_hint())
    await asyncio.sleep(0)
    assert not waiter.done()
    await store.submit_command(
        Command(command_id="c", task_id="t", kind=CommandKind.STOP, created_at=datetime.now(UTC))
    )
    await asyncio.wait_for(waiter, timeout=1)
    second = asyncio.create_task(store.wait_command_hint())
    await asyncio.sleep(0)
    assert not second.done(), "the event is replaced after each wake"
    await store.close()
    await asyncio.wait_for(asyncio.gather(second, return_exceptions=True), timeout=1)


async def test_node_leases_follow_the_injected_clock() -> None:
    from chongming.stores.nodes import NodeInfo

    clock = ManualClock()
    store = InMemoryTaskStore(clock=clock)
    info = NodeInfo(owner="n", incarnation="i", host="h", pid=1, version="1", num_buckets=4)
    record = await store.register_node(info, ttl_seconds=10)
    assert record.lease_expires_at == clock.now + timedelta(seconds=10)
    clock.advance(9.999)
    assert [r.live for r in await store.nodes()] == [True]
    clock.advance(0.001)
    assert [r.live for r in await store.nodes()] == [False]
