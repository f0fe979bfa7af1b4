"""One task from submit to its end, for each kind of carrier."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

import pytest

from chongming import (
    ConfigurationError,
    InlineExecutor,
    PayloadError,
    TaskRun,
    TaskStatus,
    run_task,
)
from tests.support import assert_sound, trajectory

S = TaskStatus
HAPPY = [
    ("pending", "queued", "orchestrator:dependencies_resolved"),
    ("queued", "starting", "scheduler:dispatch"),
    ("starting", "running", "executor:launched"),
    ("running", "succeeded", "executor:completed"),
]


def extract(ctx, source: str) -> list[int]:  # type: ignore[no-untyped-def]
    rows = []
    for index in range(5):
        ctx.checkpoint()
        rows.append(index)
    return rows


async def aextract(ctx, count: int) -> int:  # type: ignore[no-untyped-def]
    for _ in range(count):
        await ctx.checkpoint()
    return count


async def test_sync_task_in_a_thread_follows_the_happy_path() -> None:
    began = time.monotonic()
    async with TaskRun(extract, ("s3://demo/rows",), task_id="demo-1", label="抽取") as run:
        outcome = await run.wait(timeout=10)
    took = time.monotonic() - began
    assert trajectory(run) == HAPPY
    assert outcome.ok
    assert outcome.value == [0, 1, 2, 3, 4]
    assert outcome.attempts == 1
    assert 0 < outcome.elapsed <= took  # measured inside what the caller saw
    assert_sound(run)


async def test_coroutine_task_runs_on_the_loop() -> None:
    seen: list[int] = []

    async def job(ctx, n: int) -> int:  # type: ignore[no-untyped-def]
        seen.append(threading.get_ident())
        return await aextract(ctx, n)

    outcome = await run_task(job, 3)
    assert outcome.value == 3
    assert seen == [threading.get_ident()]


async def test_inline_executor_runs_on_the_loop_thread() -> None:
    seen: list[int] = []

    def job(ctx) -> str:  # type: ignore[no-untyped-def]
        seen.append(threading.get_ident())
        ctx.checkpoint()
        return "ok"

    outcome = await run_task(job, executor=InlineExecutor())
    assert outcome.value == "ok"
    assert seen == [threading.get_ident()]


async def test_snapshot_reflects_state_and_versions() -> None:
    gate = asyncio.Event()

    async def job(ctx) -> str:  # type: ignore[no-untyped-def]
        ctx.progress(1, total=4, unit="files", message="a")
        await gate.wait()
        return "done"

    async with TaskRun(job, task_id="snap", label="快照") as run:
        while run.status is not S.RUNNING:
            await asyncio.sleep(0)
        snap = run.snapshot
        assert (snap.status, snap.status_version, snap.attempt) == (S.RUNNING, 3, 1)
        assert snap.started_at is not None
        assert snap.finished_at is None
        await asyncio.sleep(0)
        progress = run.snapshot.progress
        assert progress is not None
        assert progress.render() == "1/4 files"
        gate.set()
        await run.wait(5)
    final = run.snapshot
    assert (final.status, final.status_version, final.result) == (S.SUCCEEDED, 4, "done")
    assert final.finished_at is not None
    assert final.label == "快照"


async def test_wait_timeout_raises_and_changes_nothing() -> None:
    gate = asyncio.Event()

    async def job(ctx) -> None:  # type: ignore[no-untyped-def]
        await gate.wait()

    async with TaskRun(job) as run:
        with pytest.raises(TimeoutError):
            await run.wait(timeout=0.05)
        assert run.status is S.RUNNING
        assert run.status_version == 3
        gate.set()
        assert (await run.wait(5)).ok


async def test_cancelling_a_waiter_does_not_touch_the_task() -> None:
    gate = asyncio.Event()

    async def job(ctx) -> str:  # type: ignore[no-untyped-def]
        await gate.wait()
        return "fine"

    async with TaskRun(job) as run:
        waiter = asyncio.ensure_future(run.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert run.status is S.RUNNING
        gate.set()
        assert (await run.wait(5)).value == "fine"


async def test_many_waiters_each_see_the_end_and_a_cancelled_one_leaves_nothing() -> None:
    """Each waiter awaits its own future: cancelling or timing out one touches no other,
    and the ones given up on are not kept (a loop of timed-out waits must not grow)."""
    gate = asyncio.Event()

    async def job(ctx) -> str:  # type: ignore[no-untyped-def]
        await gate.wait()
        return "fine"

    async with TaskRun(job) as run:
        waiters = [asyncio.ensure_future(run.wait()) for _ in range(3)]
        cancelled = asyncio.ensure_future(run.wait())
        await asyncio.sleep(0)
        cancelled.cancel()
        for _ in range(20):
            with pytest.raises(TimeoutError):
                await run.wait(timeout=0)
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert len(run._waiters or ()) == 3  # the three still waiting, nothing else
        gate.set()
        outcomes = await asyncio.gather(*waiters)
    assert [outcome.value for outcome in outcomes] == ["fine"] * 3
    assert run._waiters is None


async def test_negative_wait_timeout_is_refused() -> None:
    async with TaskRun(aextract, (1,)) as run:
        with pytest.raises(ConfigurationError):
            await run.wait(timeout=-1)
        await run.wait(5)


async def test_non_json_arguments_are_refused_before_anything_runs() -> None:
    calls: list[object] = []

    def job(ctx, value: object) -> None:  # type: ignore[no-untyped-def]
        calls.append(value)

    for bad in (object(), {1}, b"x", float("nan"), "nul\x00"):
        with pytest.raises(PayloadError):
            TaskRun(job, (bad,))
        with pytest.raises(PayloadError):
            TaskRun(job, kwargs={"value": bad})
    assert calls == []


async def test_arguments_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="arguments do not fit"):
        TaskRun(extract, ())
    with pytest.raises(ConfigurationError, match="context parameter"):
        TaskRun(lambda: None)


async def test_each_attempt_gets_its_own_artifact_dir(tmp_path: Path) -> None:
    dirs: list[Path] = []
    from chongming import RetryPolicy

    def job(ctx) -> str:  # type: ignore[no-untyped-def]
        directory = ctx.artifact_dir
        dirs.append(directory)
        (directory / "part").write_text(str(ctx.attempt))
        if ctx.attempt < 2:
            raise RuntimeError("first attempt fails")
        return "ok"

    outcome = await run_task(
        job,
        task_id="a/b c",
        retry=RetryPolicy(max_attempts=2, backoff=_instant()),
        artifact_root=tmp_path,
    )
    assert outcome.ok
    assert len(set(dirs)) == 2
    assert all(d.is_dir() and tmp_path in d.parents for d in dirs)
    assert [(d / "part").read_text() for d in dirs] == ["1", "2"]


async def test_task_logger_is_named_after_the_task(caplog: pytest.LogCaptureFixture) -> None:
    def job(ctx) -> None:  # type: ignore[no-untyped-def]
        ctx.log("hello %s", "world")
        ctx.warning("careful")

    with caplog.at_level(logging.INFO, logger="chongming.task"):
        await run_task(job, task_id="log-1")
    names = {(r.name, r.getMessage()) for r in caplog.records}
    assert ("chongming.task.log-1", "hello world") in names
    assert ("chongming.task.log-1", "careful") in names
    assert "chongming.task.log-1" not in logging.Logger.manager.loggerDict


async def test_progress_does_not_refresh_the_heartbeat() -> None:
    beats: list[float] = []

    def job(ctx) -> None:  # type: ignore[no-untyped-def]
        ctx.checkpoint()
        beats.append(ctx.heartbeat)
        time.sleep(0.01)
        ctx.progress(5, total=10)
        beats.append(ctx.heartbeat)
        time.sleep(0.01)
        ctx.checkpoint()
        beats.append(ctx.heartbeat)

    await run_task(job)
    assert beats[0] == beats[1] < beats[2]


def _instant():
    from chongming import ExponentialBackoff

    return ExponentialBackoff(base=0.001, max_delay=0.001)
