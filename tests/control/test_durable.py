"""Durable tasks in one process: memoised steps across attempts, fencing, resume by reconcile."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chongming import (
    ConfigurationError,
    Controller,
    ExponentialBackoff,
    RetryPolicy,
    TaskStatus,
)
from chongming.errors import FencingError, StepFailed
from chongming.state.machine import apply_transition
from chongming.state.triggers import Trigger
from chongming.stores.durable import StepRecord
from chongming.stores.sqlite import SqliteTaskStore
from tests.conftest import FAST

RETRY_ONCE = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
RAN: Counter[str] = Counter()
SCRIPT: dict[str, Any] = {}


class Flaky(Exception):
    pass


async def fetch(value: int) -> int:
    RAN["fetch"] += 1
    return value + 1


def transform(value: int) -> dict[str, int]:
    RAN["transform"] += 1  # a plain function: run in a worker thread
    return {"doubled": value * 2}


async def pipeline(ctx: Any, start: int) -> Any:
    """Steps in the order SCRIPT["order"] gives (a test changes it between attempts)."""
    results = {}
    for name in SCRIPT["order"][ctx.attempt - 1]:
        if name == "fetch":
            results[name] = await ctx.step("fetch", fetch, start)
        elif name == "transform":
            results[name] = await ctx.step("transform", transform, start)
        else:
            results[name] = await ctx.step(name, fetch, 100)
    if ctx.attempt == 1 and SCRIPT.get("fail_first", True):
        raise Flaky("the first attempt dies after its steps")
    return results


def _worker(db: Path, owner: str = "w-1", **options: Any) -> Controller:
    node = Controller(store=db, owner=owner, work=True, poll_interval=0.05, windows=FAST, **options)
    node.register("pipeline", pipeline, durable=True, retry=RETRY_ONCE)
    return node


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()
    SCRIPT.clear()


async def _run(db: Path, **script: Any) -> Any:
    SCRIPT.update(script)
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("pipeline", 1, task_id="p-1")
        async with _worker(db):
            return await queued.wait(timeout=20)


async def test_a_second_attempt_replays_recorded_steps_without_running_them(tmp_path: Path) -> None:
    final = await _run(tmp_path / "q.db", order=[["fetch", "transform"], ["fetch", "transform"]])
    assert final.status is TaskStatus.SUCCEEDED
    assert final.attempt == 2
    assert final.result == {"fetch": 2, "transform": {"doubled": 2}}
    assert RAN == {"fetch": 1, "transform": 1}  # attempt 2 ran neither: it replayed both
    async with SqliteTaskStore(tmp_path / "q.db") as store:
        steps = await store.steps("p-1")
        (run,) = (await store.durable_runs(["p-1"])).values()
    assert [(s.name, s.seq, s.epoch) for s in steps] == [("fetch", 1, 1), ("transform", 2, 1)]
    assert run.epoch == 2  # each attempt raised it


async def test_a_new_step_may_be_inserted_but_the_recorded_order_must_hold(tmp_path: Path) -> None:
    inserted = await _run(
        tmp_path / "a.db", order=[["fetch", "transform"], ["fetch", "audit", "transform"]]
    )
    assert inserted.status is TaskStatus.SUCCEEDED
    assert RAN == {"fetch": 2, "transform": 1}  # fetch once for itself, once inside "audit"
    RAN.clear()
    swapped = await _run(tmp_path / "b.db", order=[["fetch", "transform"], ["transform", "fetch"]])
    assert swapped.status is TaskStatus.FAILED
    assert swapped.failure is not None
    assert swapped.failure.exception_type == "NondeterminismError"
    assert "called step 'transform' before 'fetch'" in swapped.failure.message


async def test_a_failed_step_fails_the_same_way_on_replay(tmp_path: Path) -> None:
    seen: list[str] = []

    async def broken() -> None:
        RAN["broken"] += 1
        raise ValueError("row 7 is malformed")

    async def uses_broken(ctx: Any) -> str:
        try:
            await ctx.step("parse", broken)
        except StepFailed as error:
            seen.append(f"{error.error_type}: {error.message}")
        if ctx.attempt == 1:
            raise Flaky("again")
        return "done"

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("uses_broken", task_id="b-1")
        worker = _worker(db)
        worker.register("uses_broken", uses_broken, durable=True, retry=RETRY_ONCE)
        async with worker:
            final = await queued.wait(timeout=20)
    assert final.status is TaskStatus.SUCCEEDED
    assert seen == ["ValueError: row 7 is malformed"] * 2
    assert RAN["broken"] == 1  # the replay raised the recorded error without running it


async def test_a_result_that_is_not_json_is_recorded_as_the_steps_failure(
    tmp_path: Path,
) -> None:
    """The body ran; what it gave cannot be kept. Recorded as a failure, it does not run again."""

    async def opaque() -> object:
        RAN["opaque"] += 1
        return object()

    seen: list[str] = []

    async def uses_opaque(ctx: Any) -> None:
        try:
            await ctx.step("opaque", opaque)
        except StepFailed as error:
            seen.append(error.error_type)
            raise

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("uses_opaque", task_id="o-1")
        worker = _worker(db)
        worker.register("uses_opaque", uses_opaque, durable=True, retry=RETRY_ONCE)
        async with worker:
            final = await queued.wait(timeout=20)
        async with SqliteTaskStore(db) as store:
            (step,) = await store.steps("o-1")
    assert final.status is TaskStatus.FAILED
    assert final.failure is not None
    assert "the result of step 'opaque'" in final.failure.message
    assert seen == ["PayloadError", "PayloadError"]  # the first run, then the replay
    assert RAN == {"opaque": 1}
    assert (step.ok, step.value["type"]) == (False, "PayloadError")


async def test_a_replaced_attempt_is_fenced_and_cannot_swallow_it(tmp_path: Path) -> None:
    swallowed: list[str] = []
    second = asyncio.Event()

    async def replaced(ctx: Any) -> None:
        await ctx.step("one", fetch, 1)
        await second.wait()  # meanwhile another attempt takes the epoch
        try:
            await ctx.step("two", fetch, 2)
        except Exception as error:  # the point: this cannot catch it
            swallowed.append(repr(error))
        finally:
            with pytest.raises(FencingError):
                await ctx.step("three", fetch, 3)  # and every later call refuses too

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("replaced", task_id="f-1")
        worker = _worker(db)
        worker.register("replaced", replaced, durable=True)
        async with worker:
            store = worker.store
            assert store is not None
            while not await store.steps("f-1"):
                await asyncio.sleep(0.01)
            await store.begin_durable_attempt("f-1", "w-1", max_resumes=3)  # a newer attempt
            second.set()
            final = await queued.wait(timeout=20)
            steps = [s.name for s in await store.steps("f-1")]
    assert swallowed == []
    assert steps == ["one"]  # nothing the fenced attempt did after was recorded
    assert final.status is TaskStatus.FAILED


async def _plant_dead_attempt(
    db: Path,
    task_id: str,
    *,
    resumes: int = 0,
    name: str = "pipeline",
    args: tuple[Any, ...] = (1,),
    steps_done: tuple[tuple[str, Any], ...] = (("fetch", 2), ("transform", {"doubled": 2})),
) -> None:
    """A durable task that a dead worker was running, some steps in, with past resumes."""
    async with Controller(store=db, owner="client") as client:
        await client.enqueue(name, *args, task_id=task_id)
    async with SqliteTaskStore(db) as store:
        snapshot = await store.get(task_id)
        assert snapshot is not None
        history = []
        steps = [(TaskStatus.STARTING, Trigger.DISPATCH), (TaskStatus.RUNNING, Trigger.LAUNCHED)]
        resumed = [
            (TaskStatus.RETRY_WAIT, Trigger.LEASE_EXPIRED),
            (TaskStatus.QUEUED, Trigger.RESUMED),
        ]
        for attempt in range(resumes + 1):
            for to, trigger in steps + (resumed if attempt < resumes else []):
                moved, transition = apply_transition(
                    snapshot, to, trigger=trigger, at=snapshot.updated_at
                )
                owner = None if to is TaskStatus.QUEUED else "dead-worker"
                snapshot = dataclasses.replace(moved, owner=owner)
                history.append((snapshot, transition))
        first = await store.get(task_id)
        assert first is not None
        version = first.status_version
        for moved, transition in history:
            await store.save(moved, expect_version=version, transitions=[transition])
            version = moved.status_version
        epoch = await store.begin_durable_attempt(task_id, "dead-worker", max_resumes=2)
        for step, value in steps_done:
            await store.record_step(
                task_id, epoch, StepRecord(name=step, occurrence=0, ok=True, value=value)
            )


async def test_a_dead_workers_durable_task_resumes_on_a_live_worker(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    await _plant_dead_attempt(db, "r-1")
    SCRIPT.update(order=[["fetch", "transform", "load"]] * 3, fail_first=False)
    async with _worker(db, reconcile_interval=0.1) as worker:
        store = worker.store
        assert store is not None
        while (await store.get("r-1")).status is not TaskStatus.SUCCEEDED:  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        history = await store.history("r-1")
        final = await store.get("r-1")
    assert final is not None
    assert final.owner == "w-1"
    # A resume continues the lost attempt: it spends no retry (it was counted as one).
    assert final.attempt == 1
    assert RAN == {"fetch": 1}  # only the new step ("load") ran: the dead one's two replayed
    lost = [t for t in history if t.trigger == Trigger.LEASE_EXPIRED]
    assert [(t.from_status, t.to_status) for t in lost] == [
        (TaskStatus.RUNNING, TaskStatus.RETRY_WAIT)
    ]
    resumed = [t for t in history if t.trigger == Trigger.RESUMED]
    assert resumed[0].reason == "resume 1 of at most 2"


async def test_a_task_that_keeps_losing_its_workers_fails_after_its_resumes(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    await _plant_dead_attempt(db, "x-1", resumes=2)  # resumed twice already; max_resumes=2
    async with _worker(db, reconcile_interval=0.1) as worker:
        store = worker.store
        assert store is not None
        while not (await store.get("x-1")).is_terminal:  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        final = await store.get("x-1")
    assert final is not None
    assert final.status is TaskStatus.FAILED
    assert final.failure is not None
    assert "gave up after 2 resumes (max_resumes=2)" in final.failure.message
    assert RAN == {}


async def test_durable_registration_refuses_what_cannot_be_durable(tmp_path: Path) -> None:
    controller = Controller(store=tmp_path / "q.db")

    def sync_task(ctx: Any) -> None:
        return None

    with pytest.raises(ConfigurationError, match="a durable task is an async def function"):
        controller.register("sync", sync_task, durable=True)
    with pytest.raises(ConfigurationError, match="max_resumes applies to durable tasks only"):
        controller.register("plain", pipeline, max_resumes=2)
    for bad in (-1, True, "3", 2**31, 10**100):
        with pytest.raises(
            ConfigurationError, match=r"max_resumes must be an int from 0 to 2\*\*31 - 1"
        ):
            controller.register(f"bad-{bad}", pipeline, durable=True, max_resumes=bad)  # type: ignore[arg-type]
    assert controller.register("most", pipeline, durable=True, max_resumes=2**31 - 1)
    with pytest.raises(ConfigurationError, match="durable must be True or False"):
        controller.register("odd", pipeline, durable="yes")  # type: ignore[arg-type]
    await controller.close()


async def test_ctx_step_outside_a_durable_task_says_what_is_missing() -> None:
    async def plain(ctx: Any) -> None:
        await ctx.step("one", fetch, 1)

    async with Controller() as controller:
        controller.register("plain", plain)
        outcome = await (await controller.submit("plain")).wait()
    assert outcome.failure is not None
    assert "ctx.step() needs a durable task" in outcome.failure.message


async def test_a_bad_step_name_fails_the_task_with_the_reason(tmp_path: Path) -> None:
    async def badly_named(ctx: Any) -> None:
        await ctx.step("tab\there", fetch, 1)

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("badly_named", task_id="n-1")
        worker = _worker(db)
        worker.register("badly_named", badly_named, durable=True)
        async with worker:
            final = await queued.wait(timeout=20)
    assert final.status is TaskStatus.FAILED
    assert final.failure is not None
    assert "step name" in final.failure.message
    assert RAN == {}  # refused before its body ran


async def test_a_durable_sleep_keeps_its_wake_time_across_attempts(tmp_path: Path) -> None:
    naps: list[float] = []

    async def napper(ctx: Any) -> str:
        loop = asyncio.get_running_loop()
        began = loop.time()
        await ctx.sleep("nap", 0.5)
        naps.append(loop.time() - began)
        if ctx.attempt == 1:
            raise Flaky("dies right after waking")
        return "rested"

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("napper", task_id="z-1")
        worker = _worker(db)
        worker.register("napper", napper, durable=True, retry=RETRY_ONCE)
        async with worker:
            final = await queued.wait(timeout=20)
        assert client.store is not None
        (step,) = [s for s in await client.store.steps("z-1") if s.name == "sleep:nap"]
    assert final.status is TaskStatus.SUCCEEDED
    assert naps[0] >= 0.5  # the first attempt slept its full half second
    assert naps[1] < 0.5  # the second replayed the recorded wake time, already past
    assert isinstance(step.value, float)


async def test_a_negative_sleep_is_refused(tmp_path: Path) -> None:
    async def bad_nap(ctx: Any) -> None:
        await ctx.sleep("nap", -1)

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("bad_nap", task_id="z-2")
        worker = _worker(db)
        worker.register("bad_nap", bad_nap, durable=True)
        async with worker:
            final = await queued.wait(timeout=20)
    assert final.failure is not None
    assert "seconds must be a number >= 0, got -1" in final.failure.message


async def test_a_long_sleep_parks_the_task_off_its_slot_and_it_comes_back(tmp_path: Path) -> None:
    woke: list[int] = []

    async def long_nap(ctx: Any) -> str:
        await ctx.sleep("nap", 6.0)  # past PARK_AFTER: the task parks
        woke.append(ctx.attempt)
        return "rested"

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = [await client.enqueue("long_nap", task_id=f"p-{n}") for n in range(8)]
        worker = _worker(db, max_parallel=2)
        worker.register("long_nap", long_nap, durable=True)
        async with worker:
            store = worker.store
            assert store is not None
            # Eight tasks, two slots: they all get to sleep, because a parked one holds none.
            while True:
                parked = [await q.get() for q in queued]
                if all(s.status is TaskStatus.QUEUED and s.not_before for s in parked):
                    break
                await asyncio.sleep(0.05)
            stats = await worker.stats()
            assert stats.holding_slot == 0
            # Let go once the park is durable (just after the store shows it): a
            # parked task costs a row, no memory here.
            deadline = asyncio.get_running_loop().time() + 10
            while (await worker.stats()).held and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.02)
            assert (await worker.stats()).held == 0
            finals = [await q.wait(timeout=30) for q in queued]
        history = await client.history("p-0")
    assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 8
    # each came back after its wake time, continuing its first attempt (a park is no retry)
    assert sorted(woke) == [1] * 8
    assert {f.attempt for f in finals} == {1}
    steps = [(t.from_status.value, t.to_status.value, t.trigger) for t in history]
    assert ("running", "retry_wait", "runtime:sleeping") in steps
    assert ("retry_wait", "queued", "runtime:parked") in steps


@pytest.mark.parametrize("name", ["sleep:nap", "children:any"])
async def test_step_names_of_the_runtime_are_refused(tmp_path: Path, name: str) -> None:
    async def impostor(ctx: Any) -> None:
        await ctx.step(name, fetch, 1)

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("impostor", task_id="i-1")
        worker = _worker(db)
        worker.register("impostor", impostor, durable=True)
        async with worker:
            final = await queued.wait(timeout=20)
    assert final.failure is not None
    assert (
        "names starting with 'fact:', 'sleep:', 'child:' or 'children:' are the runtime's own"
        in final.failure.message
    )
    assert RAN == {}


async def test_plain_steps_run_on_the_controllers_own_worker_threads(tmp_path: Path) -> None:
    """A sync step takes a thread of the host's executor (bounded, closed with it)."""
    threads: list[str] = []

    def where() -> str:
        threads.append(threading.current_thread().name)
        return "ok"

    async def uses_a_thread(ctx: Any) -> Any:
        return await ctx.step("where", where)

    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        queued = await client.enqueue("uses_a_thread", task_id="t-1")
        worker = _worker(db)
        worker.register("uses_a_thread", uses_a_thread, durable=True)
        async with worker:
            final = await queued.wait(timeout=20)
    assert final.result == "ok"
    # anyio's worker threads, under the executor's limiter; not asyncio's default pool
    assert threads == ["AnyIO worker thread"]
