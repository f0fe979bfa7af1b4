"""A worker that dies takes only its task with it: ``failed``/``crashed``, then a new worker.

Twenty runs each of a segfault, ``os._exit(137)`` and ``os._exit(0)``: every
crash is recorded with the exit code or the signal, the controller carries
on, and the task submitted after each crash succeeds on a fresh worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chongming import Controller, ExponentialBackoff, FailureKind, RetryPolicy, TaskRun, TaskStatus
from chongming.executors import ProcessExecutor
from tests.executors import process_tasks
from tests.executors.conftest import alive
from tests.support import wait_for

RUNS = 20
_NO_WAIT = ExponentialBackoff(base=0.01, max_delay=0.01)


@pytest.mark.parametrize(
    ("name", "args", "said"),
    [
        ("segfault", (), "was killed by signal SIGSEGV (11)"),
        ("hard_exit", (137,), "exited with code 137"),
        ("hard_exit", (0,), "exited with code 0"),
    ],
)
async def test_crashes_are_contained_and_the_next_task_runs(
    processes: ProcessExecutor, name: str, args: tuple[object, ...], said: str
) -> None:
    async with Controller(executor=processes, max_parallel=2) as controller:
        controller.register(name, getattr(process_tasks, name))
        controller.register("add", process_tasks.add)
        for i in range(RUNS):
            crashed = await controller.submit(name, *args)
            outcome = await crashed.wait(30)
            assert outcome.status is TaskStatus.FAILED, (i, outcome)
            assert outcome.failure is not None
            assert outcome.failure.kind is FailureKind.CRASHED
            assert said in outcome.failure.message
            assert "before it returned a result" in outcome.failure.message
            after = await controller.submit("add", i, 1)
            assert (await after.wait(30)).value == i + 1
        stats = processes.statistics()
    assert stats.exited >= RUNS  # each crash took its worker...
    assert stats.started <= RUNS + 2  # ...and the tasks after them reused the replacements


async def test_a_process_killed_from_outside_says_so(processes: ProcessExecutor) -> None:
    async with Controller(executor=processes) as controller:
        controller.register("killed", process_tasks.killed_from_outside)
        controller.register("add", process_tasks.add)
        outcome = await (await controller.submit("killed")).wait(30)
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.CRASHED
        assert "SIGKILL (9)" in outcome.failure.message
        assert "out-of-memory killer" in outcome.failure.message
        assert (await (await controller.submit("add", 2, 2)).wait(30)).value == 4


async def test_a_crash_is_retried_like_any_retryable_failure(processes: ProcessExecutor) -> None:
    async with Controller(executor=processes) as controller:
        controller.register(
            "segfault",
            process_tasks.segfault,
            retry=RetryPolicy(max_attempts=2, backoff=_NO_WAIT),
        )
        outcome = await (await controller.submit("segfault")).wait(30)
    assert outcome.status is TaskStatus.FAILED
    assert outcome.attempts == 2


async def test_a_crashed_worker_takes_what_its_task_started_along(
    processes: ProcessExecutor, tmp_path: Path
) -> None:
    """A child left in the group of a worker that crashed would run on beside the retry."""
    pid_file = tmp_path / "pids"
    async with TaskRun(process_tasks.spawn_then_crash, (str(pid_file),), executor=processes) as run:
        outcome = await run.wait(30)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CRASHED
    sleeper = int(pid_file.read_text())
    await wait_for(lambda: not alive(sleeper), 5)
