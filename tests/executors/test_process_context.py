"""The context crosses the boundary: identity, progress, heartbeats, logs, artifacts, errors."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from chongming import (
    Controller,
    ControlWindows,
    ExponentialBackoff,
    FailureKind,
    InMemoryTaskStore,
    RetryPolicy,
    TaskRun,
    TaskStatus,
    task,
)
from chongming.executors import ProcessExecutor, in_child_loop
from tests.executors import process_tasks
from tests.support import trajectory, wait_for

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=2.0)


async def test_identity_and_arguments_reach_the_child(processes: ProcessExecutor) -> None:
    async with TaskRun(
        process_tasks.identity, task_id="who", name="whoami", executor=processes
    ) as run:
        outcome = await run.wait(30)
    value = outcome.value
    assert isinstance(value, dict)
    assert value == {"task_id": "who", "name": "whoami", "attempt": 1, "pid": value["pid"]}
    assert value["pid"] != os.getpid()
    async with TaskRun(process_tasks.add, (40,), {"b": 2}, executor=processes) as run:
        assert (await run.wait(30)).value == 42


async def test_workers_are_reused_between_tasks(processes: ProcessExecutor) -> None:
    pids = set()
    for _ in range(10):
        async with TaskRun(process_tasks.where, executor=processes) as run:
            pids.add((await run.wait(30)).value)
    assert len(pids) <= processes.max_workers
    assert processes.statistics().started <= processes.max_workers


async def test_progress_logs_and_artifacts_come_back(
    processes: ProcessExecutor, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO, logger="chongming.task")
    async with TaskRun(
        process_tasks.progress_and_log,
        (5,),
        task_id="reporter",
        executor=processes,
        artifact_root=tmp_path,
    ) as run:
        outcome = await run.wait(30)
    assert outcome.status is S.SUCCEEDED
    assert run.progress is not None
    assert (run.progress.done, run.progress.total, run.progress.message) == (5, 5, "step 5")
    artifact_dir = Path(str(outcome.value))
    assert artifact_dir == tmp_path / "reporter" / "attempt-1"
    assert (artifact_dir / "out.txt").read_text() == "ok"
    records = [r for r in caplog.records if r.name == "chongming.task.reporter"]
    assert [r.getMessage() for r in records] == ["done 5 steps"]
    assert records[0].process != os.getpid()


async def test_log_records_keep_their_level_and_traceback(
    processes: ProcessExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chongming.task")
    async with TaskRun(process_tasks.log_with_error, task_id="logs", executor=processes) as run:
        await run.wait(30)
    records = [r for r in caplog.records if r.name == "chongming.task.logs"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO, "starting logs"),
        (logging.ERROR, "it went wrong"),
    ]
    assert records[1].exc_text is not None
    assert "KeyError: 'missing'" in records[1].exc_text


async def test_heartbeats_and_progress_reach_the_store(
    processes: ProcessExecutor, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    store = InMemoryTaskStore()
    async with Controller(executor=processes, store=store, poll_interval=0.05) as controller:
        controller.register("steps", process_tasks.step_until_released)
        run = await controller.submit("steps", str(release), task_id="steps")

        async def stored_progress() -> float:
            snapshot = await controller.get("steps")
            if snapshot.progress is None or snapshot.last_heartbeat_at is None:
                return 0.0
            return snapshot.progress.done

        while await stored_progress() < 3:
            await asyncio.sleep(0.02)
        release.touch()
        outcome = await run.wait(30)
    assert outcome.status is S.SUCCEEDED


async def test_exceptions_keep_their_type_and_retry_policies_see_it(
    processes: ProcessExecutor,
) -> None:
    async with TaskRun(process_tasks.fail, ("boom",), executor=processes) as run:
        outcome = await run.wait(30)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.exception_type, outcome.failure.message) == (
        FailureKind.EXCEPTION,
        "ValueError",
        "boom",
    )
    retry = RetryPolicy(
        max_attempts=3, retry_on=(process_tasks.Flaky,), backoff=ExponentialBackoff(base=0.01)
    )
    async with TaskRun(process_tasks.flaky, (3,), executor=processes, retry=retry) as run:
        outcome = await run.wait(30)
    assert (outcome.status, outcome.value, outcome.attempts) == (S.SUCCEEDED, 3, 3)
    not_this = RetryPolicy(max_attempts=3, retry_on=(KeyError,))
    async with TaskRun(process_tasks.flaky, (3,), executor=processes, retry=not_this) as run:
        outcome = await run.wait(30)
    assert (outcome.status, outcome.attempts) == (S.FAILED, 1)


async def test_results_that_cannot_be_stored_are_result_invalid(processes: ProcessExecutor) -> None:
    for target, said in [
        (process_tasks.not_json, "not JSON-serialisable"),
        (process_tasks.returns_nan, "NaN"),
    ]:
        async with TaskRun(target, executor=processes) as run:
            outcome = await run.wait(30)
        assert outcome.status is S.FAILED
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.RESULT_INVALID
        assert said in outcome.failure.message
    assert processes.statistics().exited == 0  # the worker is fine


async def test_a_misused_checkpoint_is_not_retried(processes: ProcessExecutor) -> None:
    retry = RetryPolicy(max_attempts=3)
    async with TaskRun(process_tasks.misuse_checkpoint, executor=processes, retry=retry) as run:
        outcome = await run.wait(30)
    assert outcome.failure is not None
    assert (outcome.failure.exception_type, outcome.attempts) == ("CheckpointMisuse", 1)


async def test_a_coroutine_runs_on_the_childs_own_loop(
    processes: ProcessExecutor, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    target = in_child_loop(process_tasks.async_until_released)
    async with TaskRun(target, (str(release),), executor=processes, windows=FAST) as run:
        await wait_for(lambda: run.progress is not None and run.progress.done >= 2, 30)
        assert await run.pause() is True
        held = run.progress
        await asyncio.sleep(0.2)
        assert run.progress == held
        assert await run.resume() is True
        release.touch()
        outcome = await run.wait(30)
    assert outcome.status is S.SUCCEEDED
    assert ("paused", "running", "user:resume") in trajectory(run)
    async with TaskRun(target, (str(tmp_path / "never"),), executor=processes, windows=FAST) as run:
        await wait_for(lambda: run.progress is not None, 30)
        assert await run.stop() is True
        outcome = await run.wait(30)
    assert outcome.status is S.STOPPED
    assert run.transitions[-1].reason is None  # it left at its checkpoint: nothing was killed


async def test_controller_default_registration_and_task_decorator(
    processes: ProcessExecutor,
) -> None:
    decorated = task(executor=processes)(process_tasks.where)
    threads_default = Controller()
    async with threads_default as controller:
        controller.register("by_registration", process_tasks.where, executor=processes)
        controller.register("by_decorator", decorated)
        for name in ("by_registration", "by_decorator"):
            outcome = await (await controller.submit(name)).wait(30)
            assert outcome.value != os.getpid()
    async with Controller(executor=processes) as controller:
        controller.register("by_default", process_tasks.where)
        outcome = await (await controller.submit("by_default")).wait(30)
        assert outcome.value != os.getpid()


async def test_the_trace_id_reaches_the_child(processes: ProcessExecutor) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from chongming.web.tracing import ChongmingTracing

    tracing = ChongmingTracing(TracerProvider())
    async with Controller(observers=[tracing], executor=processes) as controller:
        controller.register("trace_id_of", process_tasks.trace_id_of)
        outcome = await (await controller.submit("trace_id_of")).wait(30)
    value = outcome.value
    assert isinstance(value, str)
    assert len(value) == 32
    assert int(value, 16) != 0
