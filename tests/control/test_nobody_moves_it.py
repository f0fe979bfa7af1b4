"""No enqueued task sits non-terminal with nobody to move it (issue 22, cases 10 and 13).

Before: a worker killed while a task waited out its retry backoff
(``retry_wait``) left it stranded — reconcile called it "adoptable … it
never started" and nothing moved it again, with a live worker serving it. A
closing worker stopped such a task for good. And ``reconcile --dry-run``
listed every unowned task of the work queue (parked durable tasks among
them) as "adoptable … no owner recorded; it never started".
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskStatus
from chongming.plane.reconcile import ReconcileOutcome
from chongming.state.machine import apply_transition
from chongming.state.records import Failure, FailureKind
from chongming.state.triggers import Trigger
from tests.conftest import FAST
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]

#: One retry, after a backoff far longer than any test.
LATER = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=3600, max_delay=3600))


async def flaky(ctx: Any) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return f"attempt {ctx.attempt}"


async def napper(ctx: Any) -> str:
    await ctx.sleep("nap", 3600)
    return "woke"


def _worker(where: object, stores: StoreMaker, owner: str, **options: Any) -> Controller:
    worker = Controller(
        store=stores.make(where),
        owner=owner,
        work=True,
        poll_interval=0.05,
        windows=FAST,
        **options,
    )
    worker.register("flaky", flaky, retry=LATER)
    worker.register("napper", napper, durable=True)
    return worker


async def _until(check: Any, timeout: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := await check()):
        assert loop.time() < deadline, "not within the bound"
        await asyncio.sleep(0.02)
    return found


async def test_a_dead_workers_retry_wait_task_is_requeued_and_retried(
    where: object, stores: StoreMaker
) -> None:
    async with Controller(store=stores.make(where), owner="client") as client:
        queued = await client.enqueue("flaky", task_id="r-1")
        store = client.store
        assert store is not None
        # What a worker killed during the backoff leaves: retry_wait, owned by a dead node.
        [claimed] = await store.claim("ghost", serves={"flaky": [None]}, buckets=None, limit=1)
        at = datetime.now(UTC)
        starting, t1 = apply_transition(
            claimed, TaskStatus.STARTING, trigger=Trigger.DISPATCH, at=at
        )
        running, t2 = apply_transition(
            starting, TaskStatus.RUNNING, trigger=Trigger.LAUNCHED, at=at
        )
        waiting, t3 = apply_transition(
            running, TaskStatus.RETRY_WAIT, trigger=Trigger.RETRY_SCHEDULED, at=at
        )
        failure = Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True)
        await store.save(
            dataclasses.replace(waiting, failure=failure),
            expect_version=claimed.status_version,
            transitions=[t1, t2, t3],
        )
        dry = await client.reconcile(dry_run=True)
        [entry] = [e for e in dry.entries if e.task_id == "r-1"]
        assert entry.outcome is ReconcileOutcome.REQUEUED
        assert "never started" not in entry.detail
        assert "retry backoff" in entry.detail
        assert (await queued.get()).status is TaskStatus.RETRY_WAIT  # a dry run writes nothing
        report = await client.reconcile()
        assert [e.outcome for e in report.entries if e.task_id == "r-1"] == [
            ReconcileOutcome.REQUEUED
        ]
        requeued = await queued.get()
        assert (requeued.status, requeued.owner, requeued.not_before) == (
            TaskStatus.QUEUED,
            None,
            None,
        )
        async with _worker(where, stores, "w-live"):
            final = await queued.wait(timeout=10)
        assert final.status is TaskStatus.SUCCEEDED
        assert final.result == "attempt 2"  # the retry it was owed, not a fresh first attempt
        triggers = [t.trigger for t in await client.history("r-1")]
        assert Trigger.RETRY_HANDED_BACK in triggers


async def test_a_closing_worker_hands_its_retry_wait_task_back(
    where: object, stores: StoreMaker
) -> None:
    async with Controller(store=stores.make(where), owner="client") as client:
        queued = await client.enqueue("flaky", task_id="r-2")

        async def waiting_for_retry() -> bool:
            return (await queued.get()).status is TaskStatus.RETRY_WAIT

        before = datetime.now(UTC)
        async with _worker(where, stores, "w-1"):
            await _until(waiting_for_retry)
        stored = await queued.get()
        assert stored.status is TaskStatus.QUEUED  # not stopped: the retry is still owed
        assert stored.owner is None
        assert stored.not_before is not None
        # claimable when its backoff ends, as it would have been retried here
        assert before + timedelta(seconds=3500) < stored.not_before
        assert stored.not_before < datetime.now(UTC) + timedelta(seconds=3700)
        last = (await client.history("r-2"))[-1]
        assert (last.from_status, last.to_status, last.trigger) == (
            TaskStatus.RETRY_WAIT,
            TaskStatus.QUEUED,
            Trigger.RETRY_RELEASED,
        )


async def test_reconcile_reports_the_work_queue_as_waiting_not_adoptable(
    where: object, stores: StoreMaker
) -> None:
    async with Controller(store=stores.make(where), owner="client") as client:
        await client.enqueue("unserved", task_id="now")
        later = datetime.now(UTC) + timedelta(hours=1)
        await client.enqueue("flaky", task_id="later", not_before=later)
        parked = await client.enqueue("napper", task_id="parked")
        async with _worker(where, stores, "w-1"):

            async def is_parked() -> bool:
                stored = await parked.get()
                return stored.owner is None and stored.attempt == 1

            await _until(is_parked)
        report = await client.reconcile(dry_run=True)
        by_id = {entry.task_id: entry for entry in report.entries}
        assert not report.adoptable
        for task_id in ("now", "later", "parked"):
            entry = by_id[task_id]
            assert entry.outcome is ReconcileOutcome.WAITING
            assert "never started" not in entry.detail
        assert "parked after attempt 1 (a durable sleep or fact wait): claimable from" in (
            by_id["parked"].detail
        )
        assert f"claimable from {later.isoformat()}" in by_id["later"].detail
        assert "by any worker serving napper" in by_id["parked"].detail
        assert "claimable now by any worker serving unserved" in by_id["now"].detail
