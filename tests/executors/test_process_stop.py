"""Stop, pause and timeouts of a task in a worker process, end to end.

A checkpointing child honours a stop in milliseconds; one that does not is
terminated after the stop grace window, then killed with its whole process
group, and recorded ``stopped`` saying how. Pause parks the child at its
checkpoint until the resume. The per-attempt and idle timeouts kill the same way.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from chongming import ControlWindows, FailureKind, TaskRun, TaskStatus, Timeout
from chongming.executors import ProcessExecutor
from tests.executors import process_tasks
from tests.executors.conftest import alive
from tests.support import assert_sound, trajectory, wait_for, wait_status

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=2.0)


def _status(run: TaskRun) -> TaskStatus:
    """The status now (a call, so the type checker does not narrow it across awaits)."""
    return run.status


async def test_a_deaf_task_and_its_children_are_gone_within_grace_plus_one(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pids"
    windows = ControlWindows(stop_grace=2.0)
    async with (
        ProcessExecutor(max_workers=1, start_method="spawn") as executor,
        TaskRun(
            process_tasks.deaf_parent, (str(pid_file),), executor=executor, windows=windows
        ) as run,
    ):
        await wait_for(pid_file.exists, timeout=60)
        pids = [int(pid) for pid in pid_file.read_text().split()]
        assert len(pids) == 3  # the worker and its two `sleep 300`
        assert all(alive(pid) for pid in pids)
        asked = time.monotonic()
        assert await run.stop(reason="release window") is True
        outcome = await run.wait(30)
        while any(alive(pid) for pid in pids) and time.monotonic() - asked < 3.0:
            await asyncio.sleep(0.01)
        gone_after = time.monotonic() - asked
    assert [pid for pid in pids if alive(pid)] == [], "a descendant survived the stop"
    assert gone_after < 2.0 + 1.0
    assert outcome.status is S.STOPPED
    last = run.transitions[-1]
    assert (last.from_status, last.to_status, last.trigger) == (
        S.STOPPING,
        S.STOPPED,
        "runtime:stop_confirmed",
    )
    assert last.reason == "release window; killed after grace (it outlived SIGTERM)"
    assert_sound(run)


async def test_a_checkpointing_child_leaves_its_checkpoint_at_once(
    processes: ProcessExecutor, tmp_path: Path
) -> None:
    left_file = tmp_path / "left"
    patient = ControlWindows(stop_grace=10.0)  # only the checkpoint can end it in time
    async with TaskRun(
        process_tasks.record_stop, (str(left_file),), executor=processes, windows=patient
    ) as run:
        await wait_status(run, S.RUNNING, timeout=30)
        await asyncio.sleep(0.05)  # well inside its checkpoint loop
        asked = time.monotonic()
        assert await run.stop(reason="enough") is True
        outcome = await run.wait(10)
    left = float(left_file.read_text())  # the child's monotonic clock is the system's
    # Well under a millisecond in practice (benchmarks/bench_process.py); slack for CI.
    assert asked <= left < asked + 1.0
    assert outcome.status is S.STOPPED
    assert run.transitions[-1].reason == "enough"  # it stopped itself: nothing was killed
    assert processes.statistics().exited == 0  # and its worker lives on


async def test_pause_parks_the_child_and_resume_releases_it(
    processes: ProcessExecutor, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    async with TaskRun(
        process_tasks.step_until_released, (str(release),), executor=processes, windows=FAST
    ) as run:
        await wait_for(lambda: run.progress is not None and run.progress.done >= 3, 30)
        assert await run.pause() is True
        assert _status(run) is S.PAUSED
        held = run.progress
        assert held is not None
        await asyncio.sleep(0.3)
        assert run.progress == held  # not one step while paused
        assert await run.resume() is True
        assert _status(run) is S.RUNNING
        await wait_for(lambda: run.progress is not None and run.progress.done > held.done, 10)
        release.touch()
        outcome = await run.wait(10)
    assert outcome.status is S.SUCCEEDED
    assert isinstance(outcome.value, int)
    assert outcome.value > held.done
    assert [step[:2] for step in trajectory(run)][2:] == [
        ("starting", "running"),
        ("running", "pausing"),
        ("pausing", "paused"),
        ("paused", "running"),
        ("running", "succeeded"),
    ]
    assert_sound(run)


async def test_a_pause_that_is_not_reached_rolls_back(processes: ProcessExecutor) -> None:
    windows = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.3)
    async with TaskRun(
        process_tasks.sleep_without_checkpoint, (1.0,), executor=processes, windows=windows
    ) as run:
        await wait_status(run, S.RUNNING, timeout=30)
        assert await run.pause() is False
        assert run.status is S.RUNNING
        outcome = await run.wait(10)
    assert outcome.status is S.SUCCEEDED


async def test_the_attempt_timeout_terminates_the_child() -> None:
    async with (
        ProcessExecutor(max_workers=1, start_method="forkserver", grace=10.0) as processes,
        TaskRun(
            process_tasks.sleep_without_checkpoint,
            (60.0,),
            executor=processes,
            timeout=Timeout(per_attempt=0.4),
        ) as run,
    ):
        outcome = await run.wait(30)  # SIGTERM ends a sleep at once: no waiting out the 10 s
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    assert outcome.failure.message == "attempt timed out (per attempt); the process was terminated"


async def test_the_idle_timeout_kills_a_child_that_ignores_sigterm(
    processes: ProcessExecutor,
) -> None:
    async with TaskRun(
        process_tasks.deaf_sleeper, (60.0,), executor=processes, timeout=Timeout(idle=0.4)
    ) as run:
        outcome = await run.wait(30)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert outcome.failure.message == (
        "attempt timed out (idle: no checkpoint); the process was killed (it outlived SIGTERM)"
    )


async def test_checkpoints_keep_the_idle_timeout_away(processes: ProcessExecutor) -> None:
    async with TaskRun(
        process_tasks.checkpoint_for, (1.5,), executor=processes, timeout=Timeout(idle=0.5)
    ) as run:
        outcome = await run.wait(60)
    assert outcome.status is S.SUCCEEDED, outcome.failure  # three idle windows long
    assert isinstance(outcome.value, int)
    assert outcome.value > 1000


async def test_force_stop_kills_at_once() -> None:
    patient = ControlWindows(stop_grace=120.0)
    async with (
        ProcessExecutor(max_workers=1, start_method="forkserver", grace=10.0) as processes,
        TaskRun(
            process_tasks.sleep_without_checkpoint, (60.0,), executor=processes, windows=patient
        ) as run,
    ):
        await wait_status(run, S.RUNNING, timeout=30)
        assert await run.force_stop(reason="now") is True
        outcome = await run.wait(10)  # far inside the 120 s grace window
    assert outcome.status is S.STOPPED
    assert run.transitions[-1].reason == "now; terminated after grace"
