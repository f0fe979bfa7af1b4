"""What a drained task costs PostgreSQL: the claim's reads and joins, and migration 0018.

- A started claim reads each task's last transition by its key and nothing
  older for a task claimed fresh (its history is that transition and the
  start the claim writes); a task with a longer history (retried, handed
  back, resumed, its start given back, parked) still gets all of it, in the
  same claim as fresh ones.
- Every claim's update fetches the rows its pick locked by their address,
  never by a scan of the whole table.
- Migration 0018 gives ``tasks`` a fillfactor, so heartbeats can be HOT; a
  schema at 0017 with tasks in it migrates to it and keeps them claimable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.postgres import schema as pg_schema
from chongming.stores.postgres.claims import _arguments
from tests.stores.pg_support import PgStoreFactory, admin_connection, require_postgres

pytestmark = pytest.mark.postgres

_S = TaskStatus
_SERVES = {"job": [None]}
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


def _queued(task_id: str, n: int = 0) -> tuple[TaskSnapshot, Transition]:
    at = T0 + timedelta(seconds=n)
    pending = TaskSnapshot(
        task_id=task_id,
        name="job",
        label=task_id,
        status=_S.PENDING,
        status_version=0,
        attempt=0,
        max_attempts=5,
        created_at=at,
        updated_at=at,
    )
    queued, step = apply_transition(pending, _S.QUEUED, trigger="orchestrator:enqueued", at=at)
    return dataclasses.replace(queued, queued_at=at), step


async def _enqueue(store: Any, task_id: str, n: int = 0) -> None:
    snapshot, step = _queued(task_id, n)
    await store.enqueue(snapshot, [step])


async def _back_to_the_queue(store: Any, claimed: Any, trigger: str, n: int) -> None:
    """The claimed task runs (or not) and goes back to the queue by ``trigger``."""
    current = claimed.snapshot
    at = T0 + timedelta(minutes=n)
    steps = []
    snapshot = current
    if trigger != "runtime:start_given_back":
        snapshot, step = apply_transition(snapshot, _S.RUNNING, trigger="executor:launched", at=at)
        steps.append(step)
    snapshot, step = apply_transition(snapshot, _S.RETRY_WAIT, trigger="runtime:sleeping", at=at)
    steps.append(step)
    snapshot, step = apply_transition(snapshot, _S.QUEUED, trigger=trigger, at=at)
    steps.append(step)
    queued = dataclasses.replace(snapshot, owner=None, queued_at=at)
    await store.save(queued, expect_version=current.status_version, transitions=steps)


_FINISHED = """
INSERT INTO {tasks} (task_id, name, label, status, status_version, attempt, max_attempts,
    owner, created_at, updated_at, queued_at, started_at, finished_at)
SELECT 'done-' || g, 'job', 'done', 'succeeded', 4, 1, 1, 'node', t, t, t, t, t
FROM generate_series(1, 5000) AS g, (SELECT timestamptz '2026-11-30') AS at (t)
"""


def _nodes(plan: Any) -> Iterator[dict[str, Any]]:
    if isinstance(plan, dict):
        if "Node Type" in plan:
            yield plan
        for value in plan.values():
            yield from _nodes(value)
    elif isinstance(plan, list):
        for value in plan:
            yield from _nodes(value)


async def _analyzed(sql: str, args: list[Any]) -> list[dict[str, Any]]:
    """The plan nodes of one run of ``sql``, rolled back (the queue is left as it was)."""
    async with admin_connection() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            found = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *args)
        finally:
            await transaction.rollback()
    return list(_nodes(json.loads(found)))


def _on(nodes: list[dict[str, Any]], relation: str, alias: str) -> list[dict[str, Any]]:
    """Scans of ``relation`` by ``alias`` (EXPLAIN numbers an alias used twice: ``t_1``)."""

    def named(node: dict[str, Any]) -> bool:
        return re.fullmatch(rf"{alias}(_[0-9]+)?", str(node.get("Alias", ""))) is not None

    return [n for n in nodes if n.get("Relation Name") == relation and named(n)]


async def test_a_fresh_claim_reads_only_each_tasks_last_transition(
    factory: PgStoreFactory,
) -> None:
    store = factory.make()
    async with store:
        for i in range(6):
            await _enqueue(store, f"fresh-{i}", i)
        claims = store._queue.claims
        args = [*_arguments("node", _SERVES, None, 4), T0 + timedelta(hours=1)]
        nodes = await _analyzed(claims._started, args)
        [update] = [
            n for n in nodes if n["Node Type"] == "ModifyTable" and n["Operation"] == "Update"
        ]
        assert update["Actual Rows"] == 4
        # The last transition: one probe by key per task, one row each.
        [last] = _on(nodes, "transitions", "q")
        assert (last["Actual Loops"], last["Actual Rows"]) == (4, 1)
        # The older history: never read for a task claimed at its first version.
        older = _on(nodes, "transitions", "tr")
        assert older
        assert all(n["Actual Loops"] == 0 for n in older), older
        # Through the store: each answer is exactly the stored history.
        answered = await store.claim_started("node", serves=_SERVES, limit=6, at=T0)
        assert len(answered) == 6
        for claimed in answered:
            assert [t.version for t in claimed.history] == [1, 2]
            assert list(claimed.history) == await store.history(claimed.snapshot.task_id)


async def test_one_claim_gives_fresh_and_long_histories_whole(factory: PgStoreFactory) -> None:
    """Retried, handed back, resumed, start given back, parked: beside fresh tasks."""
    store = factory.make()
    triggers = [
        "runtime:retry_due",
        "runtime:handed_back",
        "reconcile:resumed",
        "runtime:start_given_back",
        "runtime:parked",
    ]
    async with store:
        for i, _ in enumerate(triggers):
            await _enqueue(store, f"long-{i}", i)
        first = await store.claim_started("node", serves=_SERVES, limit=len(triggers), at=T0)
        by_id = {c.snapshot.task_id: c for c in first}
        for i, trigger in enumerate(triggers):
            await _back_to_the_queue(store, by_id[f"long-{i}"], trigger, i + 1)
        for i in range(3):
            await _enqueue(store, f"fresh-{i}", 100 + i)
        at = T0 + timedelta(hours=1)
        nodes = await _analyzed(
            store._queue.claims._started, [*_arguments("node", _SERVES, None, 16), at]
        )
        assert sum(n["Actual Loops"] for n in _on(nodes, "transitions", "tr")) > 0
        second = await store.claim_started("node", serves=_SERVES, limit=16, at=at)
        assert len(second) == len(triggers) + 3
        for claimed in second:
            stored = await store.history(claimed.snapshot.task_id)
            assert list(claimed.history) == stored
            assert claimed.history[-1].version == claimed.snapshot.status_version
        attempts = {c.snapshot.task_id: c.snapshot.attempt for c in second}
        # A retry begins a new attempt; the other four continue the one they interrupted.
        assert attempts == {
            "long-0": 2,
            "long-1": 1,
            "long-2": 1,
            "long-3": 1,
            "long-4": 1,
            "fresh-0": 1,
            "fresh-1": 1,
            "fresh-2": 1,
        }
        assert [len(c.history) for c in second if c.snapshot.task_id == "long-0"] == [6]
        assert [len(c.history) for c in second if c.snapshot.task_id == "long-3"] == [5]


async def test_every_claim_fetches_its_rows_by_address(factory: PgStoreFactory) -> None:
    store = factory.make()
    async with store:
        for i in range(40):
            await _enqueue(store, f"t-{i:02}", i)
        async with admin_connection() as conn:  # a table with a history: 5,000 finished tasks
            await conn.execute(_FINISHED.format(tasks=f'"{store.schema}".tasks'))
        claims = store._queue.claims
        base = _arguments("node", _SERVES, None, 8)
        at = T0 + timedelta(hours=1)
        variants = {
            "claim": (claims._claim, base),
            "claim excluding": (claims._claim_excluding, [*base, ["x"]]),
            "claim pool": (claims._claim_pool, [*base, [], ["x"]]),
            "claim aged": (claims._claim_aged, [*base, [], None, 60.0]),
            "started": (claims._started, [*base, at]),
            "started excluding": (claims._started_excluding, [*base, at, ["x"]]),
            "started pool": (claims._started_pool, [*base, at, [], ["x"]]),
            "started aged": (claims._started_aged, [*base, at, [], None, 60.0]),
        }
        async with admin_connection() as conn:
            await conn.execute(f'ANALYZE "{store.schema}".tasks')
        for label, (sql, args) in variants.items():
            nodes = await _analyzed(sql, args)
            scans = [n["Node Type"] for n in _on(nodes, "tasks", "t") if "Scan" in n["Node Type"]]
            assert "Tid Scan" in scans, (label, scans)  # the aged walk reads its index too
            assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], label
            [update] = [n for n in nodes if n.get("Operation") == "Update"]
            expected = 0 if "pool" in label else 8  # no task carries the pool's tag
            assert update["Actual Rows"] == expected, label


async def test_concurrent_claimers_take_every_task_once(factory: PgStoreFactory) -> None:
    client = factory.make()
    async with client:
        for i in range(120):
            await _enqueue(client, f"c-{i:03}", i)
    stores = [factory.make(schema=client.schema) for _ in range(3)]
    taken: list[str] = []

    async def drain(store: Any, owner: str) -> None:
        async with store:
            n = 0
            while True:
                n += 1
                at = T0 + timedelta(hours=1, microseconds=n)
                got = await store.claim_started(owner, serves=_SERVES, limit=7, at=at)
                if not got:
                    return
                taken.extend(c.snapshot.task_id for c in got)
                await asyncio.sleep(0)

    await asyncio.gather(*(drain(s, f"node-{k}") for k, s in enumerate(stores)))
    assert sorted(taken) == [f"c-{i:03}" for i in range(120)]


async def test_a_schema_at_0017_migrates_to_0018_keeping_its_queue(
    factory: PgStoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous = [m for m in pg_schema.MIGRATIONS if m[0] <= 17]
    assert [n for n, _ in previous] == list(range(1, 18))
    store = factory.make()
    schema = store.schema
    quoted = f'"{schema}"'
    with monkeypatch.context() as patched:
        patched.setattr(pg_schema, "MIGRATIONS", tuple(previous))
        patched.setattr(pg_schema, "SCHEMA_VERSION", 17)
        async with store:
            await _enqueue(store, "waiting", 1)
            await _enqueue(store, "claimed", 0)
            [claimed] = await store.claim_started("node", serves=_SERVES, limit=1, at=T0)
            assert claimed.snapshot.task_id == "claimed"
    async with admin_connection() as conn:
        version = await conn.fetchval(f"SELECT max(version) FROM {quoted}.schema_version")
        options = await conn.fetchval(
            "SELECT reloptions FROM pg_class WHERE oid = $1::regclass", f"{quoted}.tasks"
        )
    assert (version, options) == (17, None)
    migrated = factory.make(schema=schema)
    async with migrated:
        assert (await migrated.get("claimed")) == claimed.snapshot
        [later] = await migrated.claim_started(
            "node", serves=_SERVES, limit=5, at=T0 + timedelta(minutes=1)
        )
        assert later.snapshot.task_id == "waiting"
        assert list(later.history) == await migrated.history("waiting")
    async with admin_connection() as conn:
        versions = await conn.fetch(f"SELECT version FROM {quoted}.schema_version ORDER BY 1")
        options = await conn.fetchval(
            "SELECT reloptions FROM pg_class WHERE oid = $1::regclass", f"{quoted}.tasks"
        )
    assert [row[0] for row in versions] == list(range(1, pg_schema.SCHEMA_VERSION + 1))
    assert pg_schema.SCHEMA_VERSION == 18
    assert options == ["fillfactor=90"]
