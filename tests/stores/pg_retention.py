"""Retention at scale on PostgreSQL: seed terminal tasks with SQL, measure claims and prunes.

Shared by the proof (tests/stores/test_retention_scale.py) and the benchmark
(benchmarks/bench_prune.py). Rows are written by ``generate_series`` in a
few statements (a million tasks and four million history rows in about a
minute, then vacuumed), each a succeeded task with the history a drained task has.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming.plane.pruner import PruneReport, prune_store
from chongming.state.machine import apply_transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.postgres import PostgresTaskStore
from chongming.stores.retention import PruneSelection
from chongming.testing.store_contract import make_snapshot

__all__ = [
    "ClaimFigures",
    "ProbeFigures",
    "claim_figures",
    "lock_timeout_store",
    "probe_claims",
    "prune_beside",
    "seed_terminal_sql",
]

#: Seeded tasks finished this long ago (every prune with a week's age takes them).
SEEDED_AGE = timedelta(days=30)
_SERVES_PROBE = {"probe": [None]}

_SEED_TASKS = """
INSERT INTO {s}.tasks (task_id, name, label, status, status_version, attempt, max_attempts,
                       created_at, updated_at, queued_at, started_at, finished_at,
                       result, args, kwargs, owner)
SELECT 'old-' || g, 'record', 'old task ' || g, 'succeeded', 4, 1, 3,
       t, t, t, t, t, '1'::jsonb, '[1]'::jsonb, '{{}}'::jsonb, 'seed'
FROM generate_series($1::int, $2::int) AS g,
     LATERAL (SELECT now() - $3::interval - g * interval '1 millisecond' AS t) AS at_
"""
_SEED_HISTORY = """
INSERT INTO {s}.transitions (task_id, version, from_status, to_status, at, trigger, actor, attempt)
SELECT 'old-' || g, v.version, v.from_status, v.to_status,
       now() - $3::interval - g * interval '1 millisecond', v.trigger, 'system', 1
FROM generate_series($1::int, $2::int) AS g,
     (VALUES (1, 'pending', 'queued', 'orchestrator:enqueued'),
             (2, 'queued', 'starting', 'scheduler:dispatch'),
             (3, 'starting', 'running', 'executor:launched'),
             (4, 'running', 'succeeded', 'executor:completed'))
       AS v(version, from_status, to_status, trigger)
"""


async def seed_terminal_sql(conn: Any, schema: str, count: int, *, chunk: int = 250_000) -> float:
    """``count`` succeeded tasks with 4 history rows each; the seconds it took."""
    started = time.perf_counter()
    quoted = f'"{schema}"'
    for first in range(1, count + 1, chunk):
        last = min(count, first + chunk - 1)
        await conn.execute(_SEED_TASKS.format(s=quoted), first, last, SEEDED_AGE)
        await conn.execute(_SEED_HISTORY.format(s=quoted), first, last, SEEDED_AGE)
    # As a store whose terminal rows are old: vacuumed (all-visible) and analysed, so
    # autovacuum does not start on them while the figures are taken.
    await conn.execute(f"VACUUM (ANALYZE) {quoted}.tasks")
    await conn.execute(f"VACUUM (ANALYZE) {quoted}.transitions")
    return time.perf_counter() - started


def _queued(task_id: str, name: str) -> tuple[Any, Any]:
    at = datetime.now(UTC)
    pending = make_snapshot(task_id, name=name, created_at=at, updated_at=at)
    queued, transition = apply_transition(
        pending, TaskStatus.QUEUED, trigger="orchestrator:enqueued", at=at
    )
    return dataclasses.replace(queued, queued_at=at), transition


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClaimFigures:
    """Enqueues per second, and claim latencies (ms) of one claim at a time."""

    enqueue_rate: float
    claim_p50_ms: float
    claim_p95_ms: float


async def claim_figures(store: TaskStore, count: int, *, prefix: str) -> ClaimFigures:
    """Enqueue ``count`` tasks (8 at a time), then claim them one by one."""
    started = time.perf_counter()
    ids = [f"{prefix}-{n}" for n in range(count)]
    for first in range(0, count, 8):
        batch = [_queued(task_id, "probe") for task_id in ids[first : first + 8]]
        await asyncio.gather(*(store.enqueue(s, [t]) for s, t in batch))
    rate = count / (time.perf_counter() - started)
    latencies = []
    for _ in range(count):
        before = time.perf_counter()
        claimed = await store.claim("probe", serves=_SERVES_PROBE, limit=1)
        latencies.append((time.perf_counter() - before) * 1000)
        assert len(claimed) == 1
    latencies.sort()
    return ClaimFigures(
        enqueue_rate=rate,
        claim_p50_ms=statistics.median(latencies),
        claim_p95_ms=latencies[int(len(latencies) * 0.95) - 1],
    )


async def lock_timeout_store(dsn: str, schema: str, *, lock_timeout_ms: int = 50) -> Any:
    """A store whose every statement fails rather than wait on a lock past ``lock_timeout_ms``."""
    import asyncpg  # type: ignore[import-untyped]

    pool = await asyncpg.create_pool(
        dsn,
        min_size=1,
        max_size=2,
        server_settings={"lock_timeout": f"{lock_timeout_ms}ms", "random_page_cost": "1.1"},
    )
    return pool, PostgresTaskStore(pool, schema=schema)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProbeFigures:
    """Claims made while a prune ran: how many, their latencies, and how many hit the lock bound."""

    claims: int
    blocked: int
    p50_ms: float
    p99_ms: float
    max_ms: float


async def probe_claims(store: TaskStore, stop: asyncio.Event) -> ProbeFigures:
    """Enqueue one task and claim it, over and over until ``stop``; each claim timed."""
    latencies: list[float] = []
    blocked = 0
    n = 0
    while not stop.is_set():
        snapshot, transition = _queued(f"probe-{n}", "probe")
        n += 1
        try:
            await store.enqueue(snapshot, [transition])
            before = time.perf_counter()
            claimed = await store.claim("probe", serves=_SERVES_PROBE, limit=1)
            latencies.append((time.perf_counter() - before) * 1000)
            # One task: this one, or an older probe task the worker's reconcile gave back
            # (the probe is no live node, so its claims count as a dead owner's).
            assert len(claimed) == 1
        except Exception as error:  # a lock wait past lock_timeout: the bound was crossed
            if "lock timeout" not in str(error).lower():
                raise
            blocked += 1
        await asyncio.sleep(0.002)
    latencies.sort()
    if not latencies:
        latencies = [0.0]
    return ProbeFigures(
        claims=len(latencies),
        blocked=blocked,
        p50_ms=statistics.median(latencies),
        p99_ms=latencies[max(0, int(len(latencies) * 0.99) - 1)],
        max_ms=latencies[-1],
    )


async def prune_beside(
    store: TaskStore, probe: TaskStore, *, batch: int
) -> tuple[PruneReport, ProbeFigures]:
    """Prune every seeded task while ``probe`` claims beside it; both figures."""
    stop = asyncio.Event()
    probing = asyncio.create_task(probe_claims(probe, stop))
    try:
        cut = datetime.now(UTC) - timedelta(days=7)
        report = await prune_store(store, [PruneSelection(finished_before=cut)], batch=batch)
    finally:
        stop.set()
        figures = await probing
    return report, figures
