"""The pool: workers shared by waiting calls, replaced when they die, closed for good."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from chongming import (
    Controller,
    ControlWindows,
    ExecutorClosed,
    FailureKind,
    TaskRun,
    TaskStatus,
    Timeout,
)
from chongming.executors import ProcessExecutor
from tests.executors import parent_only, process_tasks
from tests.executors.conftest import alive
from tests.support import wait_for, wait_status

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=1.0, pause_window=0.5)
ROOT = Path(__file__).resolve().parents[2]


async def test_calls_beyond_max_workers_wait_in_starting(processes: ProcessExecutor) -> None:
    async with contextlib.AsyncExitStack() as stack:
        runs = await _started(stack, processes, 5, 0.3)
        await _wait_in_starting(runs)


async def _started(
    stack: contextlib.AsyncExitStack, executor: ProcessExecutor, count: int, seconds: float
) -> list[TaskRun]:
    """``count`` runs that each hold a worker for ``seconds``, entered on ``stack``."""
    return [
        await stack.enter_async_context(
            TaskRun(process_tasks.sleep_without_checkpoint, (seconds,), executor=executor)
        )
        for _ in range(count)
    ]


async def _end(runs: list[TaskRun]) -> None:
    """Stop runs that hold their workers (killed at once) and see them stopped."""
    for run in runs:
        await run.force_stop()
    for run in runs:
        assert (await run.wait(30)).status is S.STOPPED


async def _wait_in_starting(runs: list[TaskRun]) -> None:
    await wait_for(lambda: sum(run.status is S.RUNNING for run in runs) == 2, 30)
    assert sum(run.status is S.STARTING for run in runs) == 3  # running means running
    outcomes = [await run.wait(30) for run in runs]
    assert [outcome.status for outcome in outcomes] == [S.SUCCEEDED] * 5
    assert len({run.task_id for run in runs}) == 5


async def test_a_stop_while_waiting_for_a_worker_never_runs_it(processes: ProcessExecutor) -> None:
    async with contextlib.AsyncExitStack() as stack:
        busy = await _started(stack, processes, 2, 60.0)
        await wait_for(lambda: all(run.status is S.RUNNING for run in busy), 30)
        async with TaskRun(process_tasks.add, (1, 1), executor=processes, windows=FAST) as waiting:
            await asyncio.sleep(0.05)
            assert waiting.status is S.STARTING
            assert await waiting.stop() is True
            outcome = await waiting.wait(10)
        assert outcome.status is S.STOPPED
        assert S.RUNNING not in [t.to_status for t in waiting.transitions]
        await _end(busy)


async def test_the_start_timeout_counts_the_wait_for_a_worker(processes: ProcessExecutor) -> None:
    async with contextlib.AsyncExitStack() as stack:
        busy = await _started(stack, processes, 2, 60.0)
        await wait_for(lambda: all(run.status is S.RUNNING for run in busy), 30)
        async with TaskRun(
            process_tasks.add, (1, 1), executor=processes, timeout=Timeout(start=0.2)
        ) as late:
            outcome = await late.wait(10)
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.TIMEOUT_START
        await _end(busy)


async def test_an_idle_worker_killed_from_outside_is_replaced(processes: ProcessExecutor) -> None:
    async with TaskRun(process_tasks.where, executor=processes) as run:
        pid = (await run.wait(30)).value
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    await wait_for(lambda: processes.statistics().exited == 1, 10)
    async with TaskRun(process_tasks.where, executor=processes) as run:
        outcome = await run.wait(30)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value != pid


async def test_large_arguments_and_results_cross_the_pipe(processes: ProcessExecutor) -> None:
    payload = {"rows": ["x" * 100] * 6000, "text": "中文 ✓"}  # ~700 KB: more than a socket buffer
    async with TaskRun(process_tasks.echo, (payload,), executor=processes) as run:
        outcome = await run.wait(30)
    assert outcome.value == payload


async def test_a_module_the_worker_cannot_import_is_a_launch_error(
    processes: ProcessExecutor,
) -> None:
    async with TaskRun(parent_only.unreachable, executor=processes) as run:
        outcome = await run.wait(30)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LAUNCH_ERROR
    assert "could not import tests.executors.parent_only.unreachable" in outcome.failure.message
    assert "refuses to load in a worker process" in outcome.failure.message
    assert processes.statistics().exited == 0  # the worker itself is fine


async def test_the_stop_flag_is_fresh_without_a_checkpoint(processes: ProcessExecutor) -> None:
    async with TaskRun(process_tasks.watch_stop_flag, executor=processes, windows=FAST) as run:
        await wait_status(run, S.RUNNING, timeout=30)
        await asyncio.sleep(0.05)
        assert await run.stop() is True
        outcome = await run.wait(10)
    # It returned after the stop: it finished anyway, and the record says so.
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, "saw the stop")


async def test_closing_waits_for_running_calls_then_refuses(tmp_path: Path) -> None:
    executor = ProcessExecutor(max_workers=1, start_method="forkserver")
    async with TaskRun(process_tasks.sleep_without_checkpoint, (0.3,), executor=executor) as run:
        await wait_status(run, S.RUNNING, timeout=30)
        await executor.aclose()
        assert run.status is S.SUCCEEDED  # aclose waited for it
    assert executor.statistics().workers == 0
    async with TaskRun(process_tasks.add, (1, 2), executor=executor) as late:
        outcome = await late.wait(10)
    assert outcome.failure is not None
    assert outcome.failure.exception_type == ExecutorClosed.__name__
    await executor.aclose()  # idempotent


async def test_a_cancelled_close_kills_what_is_left() -> None:
    executor = ProcessExecutor(max_workers=1, start_method="forkserver")
    async with TaskRun(process_tasks.deaf_sleeper, (60.0,), executor=executor) as run:
        await wait_status(run, S.RUNNING, timeout=30)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await executor.aclose()
        outcome = await run.wait(10)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CRASHED
    assert "(its executor was terminated)" in outcome.failure.message
    assert "out-of-memory" not in outcome.failure.message


async def test_closing_the_controller_stops_its_process_tasks(
    processes: ProcessExecutor,
) -> None:
    async with Controller(executor=processes, windows=FAST) as controller:
        controller.register("deaf", process_tasks.deaf_sleeper)
        run = await controller.submit("deaf", 60.0)
        await wait_status(run, S.RUNNING, timeout=30)
    assert run.status is S.STOPPED
    assert run.transitions[-1].reason == (
        "the controller is closing; killed after grace (it outlived SIGTERM)"
    )


def test_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    """Idle and checkpointing workers exit once the pipe to a dead parent closes."""
    script = tmp_path / "parent.py"
    pids = tmp_path / "pids"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, os, sys
            sys.path.insert(0, {str(ROOT)!r})
            from chongming import TaskRun
            from chongming.executors import ProcessExecutor
            from tests.executors import process_tasks

            async def main():
                executor = ProcessExecutor(max_workers=2)
                async with TaskRun(process_tasks.where, executor=executor) as first:
                    idle = (await first.wait(60)).value
                async with TaskRun(process_tasks.checkpoint_and_report,
                                   ({str(pids)!r}, idle), executor=executor):
                    await asyncio.sleep(3600)

            if __name__ == "__main__":
                asyncio.run(main())
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        while not pids.exists() and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        workers = [int(pid) for pid in pids.read_text().split()]
        assert len(workers) == 2
        assert all(alive(pid) for pid in workers)
    finally:
        parent.kill()
        parent.wait(10)
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [pid for pid in workers if alive(pid)] == []


def test_it_runs_under_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> object:
        async with (
            ProcessExecutor(max_workers=1, start_method="forkserver") as executor,
            TaskRun(process_tasks.add, (2, 3), executor=executor) as run,
        ):
            return (await run.wait(30)).value

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(main()) == 5


@pytest.mark.parametrize("close", ["aclose", "terminate"])
def test_an_executor_closed_after_its_loop_ends_its_workers(
    close: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Its loop is gone, so nothing hears the workers: they are killed and reaped without it."""
    executor = ProcessExecutor(max_workers=1, start_method="forkserver")

    async def use() -> object:
        async with TaskRun(process_tasks.where, executor=executor) as run:
            return (await run.wait(30)).value

    worker = asyncio.run(use())
    assert isinstance(worker, int)
    asyncio.run(getattr(executor, close)())
    assert not alive(worker)
    assert executor.statistics().workers == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
