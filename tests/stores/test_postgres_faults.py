"""Connection faults: cut replies, cut requests, and backends terminated mid-run.

The pass mark everywhere: a call that returned normally is in the database
(no acknowledged write lost), and a write that committed is never reported
as failed (docs/reliability.md, P1 and P6).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest

from chongming.errors import StoreUnavailable, VersionConflict
from chongming.state.fold import fold_history
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.stores.nodes import Command, CommandKind
from chongming.testing.store_contract import make_snapshot, next_step
from tests.stores.pg_support import (
    PgStoreFactory,
    TcpProxy,
    admin_connection,
    require_postgres,
    reread,
)
from tests.tiers import proof_scale

pytestmark = pytest.mark.postgres
_S = TaskStatus
#: 10 rounds (2 s) in make test; the pass mark, every 200 ms for 60 s, in make proofs.
SCALE = proof_scale("CHONGMING_FAULT_SCALE", reduced=1.0, full=30.0)


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    parts = urlsplit(require_postgres())
    started = await TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    yield started
    await started.close()


@pytest.mark.parametrize("group_commit", [True, False])
async def test_a_committed_write_whose_reply_was_lost_is_reported_as_done(
    factory: PgStoreFactory, proxy: TcpProxy, group_commit: bool
) -> None:
    store = factory.make(
        dsn=proxy.dsn(factory.dsn), min_size=1, max_size=1, group_commit=group_commit
    )
    await store.create(make_snapshot("warm"))  # prepares the write statement
    snapshot = make_snapshot("t")

    proxy.drop_next_reply()
    await store.create(snapshot)  # committed, reply lost: must not raise
    assert proxy.cuts == 1
    queued, transition = next_step(snapshot, _S.QUEUED)
    proxy.drop_next_reply()
    await store.save(queued, expect_version=0, transitions=[transition])
    assert proxy.cuts == 2
    assert await store.get("t") == queued
    assert await store.history("t") == [transition]
    assert store.statistics().resolved_writes >= 2

    # A request that never arrived is not committed: it is run again, once.
    starting, second = next_step(queued, _S.STARTING)
    proxy.drop_next_request()
    await store.save(starting, expect_version=1, transitions=[second])
    assert proxy.cuts == 3
    assert await store.history("t") == [transition, second]


@pytest.mark.parametrize("group_commit", [True, False])
async def test_a_committed_write_of_tuples_and_int_keys_is_never_a_conflict(
    factory: PgStoreFactory, proxy: TcpProxy, group_commit: bool
) -> None:
    """The re-read comes back in JSON form (lists, string keys): still our write."""
    store = factory.make(
        dsn=proxy.dsn(factory.dsn), min_size=1, max_size=1, group_commit=group_commit
    )
    await store.create(make_snapshot("warm"))
    snapshot = make_snapshot("t", args=((1, 2), {3: "x"}), kwargs={"k": (4,)}, result={5: (6,)})
    proxy.drop_next_reply()
    await store.create(snapshot)  # committed, reply lost: re-read, compared, not a duplicate
    assert proxy.cuts == 1
    queued, transition = next_step(snapshot, _S.QUEUED, result=(7, {8: [9]}))
    proxy.drop_next_reply()
    await store.save(queued, expect_version=0, transitions=[transition])  # not a conflict
    assert proxy.cuts == 2
    stored = await store.get("t")
    assert stored is not None
    assert (stored.status_version, stored.result) == (1, [7, {"8": [9]}])
    assert stored.args == ([1, 2], {"3": "x"})
    assert await store.history("t") == [transition]
    assert store.statistics().resolved_writes >= 2


async def test_a_claim_whose_reply_was_lost_still_returns_its_commands(
    factory: PgStoreFactory, proxy: TcpProxy
) -> None:
    store = factory.make(dsn=proxy.dsn(factory.dsn), min_size=1, max_size=1)
    now = datetime.now(UTC)
    for i in range(3):
        await store.submit_command(
            Command(command_id=f"c{i}", task_id="t", kind=CommandKind.STOP, created_at=now)
        )
    assert await store.claim_commands("warm", lease_seconds=30, limit=1) != []
    await store.release_command("c0", "warm")
    proxy.drop_next_reply()
    claimed = await store.claim_commands("node", lease_seconds=30)
    assert proxy.cuts == 1
    assert sorted(c.command_id for c in claimed) == ["c0", "c1", "c2"]
    proxy.drop_next_reply()
    assert await store.complete_command("c1", "node") is True
    assert await store.claim_commands("other", lease_seconds=30) == []


_CYCLE = {_S.RUNNING: _S.PAUSING, _S.PAUSING: _S.RUNNING}
_START = {_S.PENDING: _S.QUEUED, _S.QUEUED: _S.STARTING, _S.STARTING: _S.RUNNING}


@pytest.mark.slow
@pytest.mark.proof
async def test_terminated_backends_mid_run_lose_no_acknowledged_write(
    factory: PgStoreFactory,
) -> None:
    store = factory.make(min_size=2, max_size=4)
    tasks = 8
    rounds = max(3, int(10 * SCALE))
    acked: list[Transition] = []
    counts = {"unavailable": 0, "conflicts": 0, "kills": 0}
    stop = asyncio.Event()

    # The store is open and every task exists before the first kill: what is
    # proved is the write path under kills (a bootstrap whose retries ran out
    # while every backend was being killed failed this test under load).
    for i in range(tasks):
        await store.create(make_snapshot(f"w-{i}"))

    async def writer(task_id: str) -> None:
        current = await reread(store, task_id)
        while not stop.is_set():
            target = _START.get(current.status) or _CYCLE[current.status]
            new, transition = next_step(current, target)
            try:
                await store.save(
                    new, expect_version=current.status_version, transitions=[transition]
                )
            except StoreUnavailable:
                counts["unavailable"] += 1  # outcome unknown: look, then carry on
                current = await reread(store, task_id)
                continue
            except VersionConflict:
                counts["conflicts"] += 1  # a committed write reported as failed
                current = await reread(store, task_id)
                continue
            acked.append(transition)
            current = new

    async def killer() -> None:
        async with admin_connection() as conn:
            for _ in range(rounds):
                await asyncio.sleep(0.2)
                counts["kills"] += await conn.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = $1",
                    factory.application_name,
                )
        stop.set()

    started = time.monotonic()
    await asyncio.wait_for(
        asyncio.gather(killer(), *(writer(f"w-{i}") for i in range(tasks))), rounds * 0.2 + 60
    )
    elapsed = time.monotonic() - started

    # The pool is back to normal: plain calls work without errors.
    for i in range(tasks):
        assert await store.get(f"w-{i}") is not None
    by_task: dict[str, list[Transition]] = {}
    for i in range(tasks):
        task_id = f"w-{i}"
        history = await store.history(task_id)
        folded = fold_history(history)  # legal path, contiguous versions
        stored = await store.get(task_id)
        assert stored is not None
        assert (stored.status, stored.status_version) == (folded.status, folded.status_version)
        by_task[task_id] = history
    for transition in acked:
        stored_history = by_task[transition.task_id]
        assert stored_history[transition.version - 1] == transition
    print(
        f"{elapsed:.1f}s, {len(acked)} acknowledged saves, {counts}, "
        f"statistics {store.statistics()}"
    )
    assert counts["conflicts"] == 0
    assert counts["kills"] >= rounds
    assert len(acked) > tasks * 10
