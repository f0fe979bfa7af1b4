"""A task may fork; only the worker speaks on the worker's pipe, and ``sys.exit`` is a failure.

A forked child that returns from the task function (or raises) instead of
calling ``os._exit`` reaches the worker's code: it exits there, with the
status a process ending that way would have, and never sends a result, a
report or a read of the parent's messages. ``SystemExit`` and
``KeyboardInterrupt`` raised by a task fail its attempt like any exception
(kind ``exception``, not retried) and the worker serves the next task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chongming import Controller, FailureKind, TaskRun, TaskStatus
from chongming.executors import ProcessExecutor, in_child_loop
from tests.executors import process_tasks
from tests.executors.conftest import alive
from tests.support import wait_for


@pytest.fixture
async def one_worker() -> AsyncIterator[ProcessExecutor]:
    async with ProcessExecutor(max_workers=1, start_method="forkserver", grace=0.3) as executor:
        yield executor


@pytest.mark.parametrize(
    ("how", "status"), [("return", 0), ("raise", 1), ("exit", 3), ("report", 0), ("libc", 0)]
)
async def test_a_forked_child_that_returns_is_not_the_task(
    one_worker: ProcessExecutor, how: str, status: int
) -> None:
    async with TaskRun(process_tasks.fork_and_wait, (how,), executor=one_worker) as run:
        outcome = await run.wait(30)
        progress = run.progress
    assert outcome.status is TaskStatus.SUCCEEDED, outcome
    assert outcome.value == {"value": "the worker's", "child_exit": status}
    assert progress is None  # the child's report never reached the parent
    async with TaskRun(process_tasks.add, (2, 3), executor=one_worker) as run:
        assert (await run.wait(30)).value == 5
    assert one_worker.statistics().started == 1


async def test_a_forked_child_never_takes_the_next_job(
    one_worker: ProcessExecutor, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    async with TaskRun(process_tasks.where, executor=one_worker) as run:
        worker = (await run.wait(30)).value
    async with TaskRun(process_tasks.fork_and_leave, (str(release),), executor=one_worker) as run:
        child = (await run.wait(30)).value
    assert isinstance(child, int)
    assert child != worker
    release.touch()
    await wait_for(lambda: not alive(child), 10)  # it returned and exited (a zombie, unreaped)
    for _ in range(10):
        async with TaskRun(process_tasks.where, executor=one_worker) as run:
            assert (await run.wait(30)).value == worker


async def test_sys_exit_fails_the_attempt_and_the_worker_serves_on(
    one_worker: ProcessExecutor,
) -> None:
    async with Controller(executor=one_worker) as controller:
        controller.register("fork", process_tasks.fork_and_wait)
        controller.register("exit", process_tasks.exit_quietly)
        controller.register("async_exit", in_child_loop(process_tasks.async_exit))
        controller.register("interrupt", process_tasks.interrupt)
        controller.register("where", process_tasks.where)
        forked = await (await controller.submit("fork", "return")).wait(30)
        assert forked.value == {"value": "the worker's", "child_exit": 0}
        worker = (await (await controller.submit("where")).wait(30)).value
        for name, args, said in [
            ("exit", (), "SystemExit: 0"),
            ("async_exit", (4,), "SystemExit: 4"),
            ("interrupt", (), "KeyboardInterrupt"),
        ]:
            outcome = await (await controller.submit(name, *args)).wait(30)
            assert outcome.status is TaskStatus.FAILED, outcome
            assert outcome.failure is not None
            assert outcome.failure.kind is FailureKind.EXCEPTION
            assert outcome.failure.exception_type == said.partition(":")[0]
            assert outcome.failure.message.startswith(said)
            assert not outcome.failure.retryable
            assert (await (await controller.submit("where")).wait(30)).value == worker
    assert one_worker.statistics().started == 1


async def test_a_child_forked_on_the_worker_loop_leaves_that_loop_alone(
    one_worker: ProcessExecutor,
) -> None:
    """It exits before its copy of the loop is torn down (epoll is shared across a fork)."""
    target = in_child_loop(process_tasks.async_fork_and_wait)
    async with TaskRun(target, executor=one_worker) as run:
        outcome = await run.wait(30)
    assert outcome.value == {"value": "the worker's", "child_exit": 0}
    async with TaskRun(in_child_loop(process_tasks.async_count), (4,), executor=one_worker) as run:
        assert (await run.wait(30)).value == 6


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
async def test_a_worker_that_dies_is_seen_to_die_while_its_forked_child_lives(
    tmp_path: Path, start_method: str
) -> None:
    """The child holds copies of the worker's descriptors; the worker's exit is seen anyway.

    And the child, left in the dead worker's process group, is killed with it.
    """
    release = tmp_path / "release"  # never made: the child would wait for ever
    async with ProcessExecutor(max_workers=1, start_method=start_method) as executor:
        async with TaskRun(process_tasks.fork_and_leave, (str(release),), executor=executor) as run:
            child = (await run.wait(30)).value
        assert isinstance(child, int)
        async with TaskRun(process_tasks.segfault, executor=executor) as run:
            outcome = await run.wait(30)
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.CRASHED
        assert "SIGSEGV" in outcome.failure.message
        await wait_for(lambda: not alive(child), 10)
