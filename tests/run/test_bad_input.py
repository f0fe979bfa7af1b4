"""What a task can get wrong, and the clear answer it gets."""

from __future__ import annotations

import asyncio
import math
import sys

import pytest

from chongming import (
    CheckpointMisuse,
    FailureKind,
    InlineExecutor,
    TaskRun,
    TaskStatus,
    run_task,
)

S = TaskStatus


def deep(levels: int) -> list[object]:
    value: list[object] = []
    for _ in range(levels):
        value = [value]
    return value


def numbers():
    yield 1


@pytest.mark.parametrize(
    "make",
    [object, lambda: {1, 2}, lambda: b"bytes", lambda: math.nan, numbers, lambda: deep(10_000)],
    ids=["object", "set", "bytes", "nan", "generator", "deep"],
)
@pytest.mark.parametrize("kind", ["thread", "coroutine"])
async def test_non_json_results_fail_with_result_invalid(make: object, kind: str) -> None:
    def sync_job(ctx):
        return make()  # type: ignore[operator]

    async def async_job(ctx):
        return make()  # type: ignore[operator]

    fn = sync_job if kind == "thread" else async_job
    outcome = await run_task(fn)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert (outcome.failure.kind, outcome.failure.retryable) == (FailureKind.RESULT_INVALID, False)
    assert outcome.value is None


async def test_result_invalid_is_never_retried() -> None:
    from chongming import RetryPolicy

    calls = 0

    def job(ctx):
        nonlocal calls
        calls += 1
        return {1}

    outcome = await run_task(job, retry=RetryPolicy(max_attempts=3))
    assert (outcome.attempts, calls) == (1, 1)


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
async def test_base_exceptions_in_a_thread_become_failures(error: BaseException) -> None:
    def raiser(ctx) -> None:  # type: ignore[no-untyped-def]
        raise error

    outcome = await run_task(raiser)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.exception_type == type(error).__name__
    assert outcome.failure.retryable is False
    # and the loop is still alive
    assert (await run_task(lambda ctx: 1)).ok


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
async def test_base_exceptions_of_a_coroutine_or_inline_become_failures(
    error: BaseException,
) -> None:
    """Task code ends neither the loop nor the worker (was: re-raised into the loop)."""

    async def coroutine(ctx) -> None:  # type: ignore[no-untyped-def]
        raise error

    def inline(ctx) -> None:  # type: ignore[no-untyped-def]
        raise error

    from chongming import RetryPolicy

    for fn, executor in ((coroutine, None), (inline, InlineExecutor())):
        outcome = await run_task(fn, executor=executor, retry=RetryPolicy(max_attempts=3))
        assert outcome.status is S.FAILED
        assert outcome.failure is not None
        assert outcome.failure.exception_type == type(error).__name__
        assert (outcome.failure.retryable, outcome.attempts) == (False, 1)
    assert (await run_task(lambda ctx: 1)).ok


async def test_system_exit_inline_becomes_a_failure() -> None:
    def raiser(ctx) -> None:  # type: ignore[no-untyped-def]
        sys.exit(2)

    outcome = await run_task(raiser, executor=InlineExecutor())
    assert outcome.failure is not None
    assert outcome.failure.exception_type == "SystemExit"


async def test_forgotten_await_on_checkpoint_fails_with_the_fix() -> None:
    async def forgot(ctx) -> str:  # type: ignore[no-untyped-def]
        ctx.checkpoint()  # missing await
        return "x"

    outcome = await run_task(forgot)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.exception_type == "CheckpointMisuse"
    assert "await ctx.checkpoint()" in outcome.failure.message


async def test_forgotten_await_is_caught_at_the_next_checkpoint() -> None:
    reached = []

    async def forgot_in_loop(ctx) -> None:  # type: ignore[no-untyped-def]
        for _ in range(3):
            ctx.checkpoint()
            reached.append(1)

    outcome = await run_task(forgot_in_loop)
    assert outcome.failure is not None
    assert "await ctx.checkpoint()" in outcome.failure.message
    assert reached == [1]


async def test_awaiting_the_checkpoint_of_a_sync_task_says_how_to_fix() -> None:
    def confused(ctx) -> None:  # type: ignore[no-untyped-def]
        async def inner() -> None:
            await ctx.checkpoint()

        asyncio.run(inner())

    outcome = await run_task(confused)
    assert outcome.failure is not None
    assert outcome.failure.exception_type == "CheckpointMisuse"
    assert "without await" in outcome.failure.message


async def test_sync_checkpoint_called_from_the_loop_is_refused() -> None:
    captured = []

    def job(ctx) -> None:  # type: ignore[no-untyped-def]
        captured.append(ctx)

    await run_task(job)
    with pytest.raises(CheckpointMisuse, match="event-loop thread"):
        captured[0].checkpoint()


async def test_bad_progress_values_raise_in_the_task() -> None:
    from chongming import PayloadError

    errors = []

    def job(ctx) -> None:  # type: ignore[no-untyped-def]
        for bad in ({"done": -1}, {"done": math.nan}, {"done": 1, "total": "x"}):
            try:
                ctx.progress(**bad)
            except PayloadError as error:
                errors.append(error)
        try:
            ctx.progress(1, message="nul\x00")
        except PayloadError as error:
            errors.append(error)

    assert (await run_task(job)).ok
    assert len(errors) == 4


async def test_controller_owned_runs_cannot_be_entered() -> None:
    from chongming import ConfigurationError
    from chongming.run.host import StandaloneHost

    run = TaskRun(lambda ctx: None, host=StandaloneHost())
    with pytest.raises(ConfigurationError):
        async with run:
            pass


async def test_sync_task_returning_a_coroutine_is_told_to_be_async() -> None:
    async def helper() -> int:
        return 1

    def mistaken(ctx):
        return helper()

    outcome = await run_task(mistaken)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "async def" in outcome.failure.message


async def test_payloads_over_the_cap() -> None:
    from chongming import PayloadError, TaskRun

    def echo(ctx, value):
        return value

    with pytest.raises(PayloadError, match="limit"):
        TaskRun(echo, ("x" * (1 << 20),))
    TaskRun(echo, ("x" * 1000,), max_payload_bytes=2000)
    with pytest.raises(PayloadError, match="limit"):
        TaskRun(echo, ("x" * 1000,), max_payload_bytes=500)

    def big(ctx) -> str:  # type: ignore[no-untyped-def]
        return "x" * (2 << 20)

    outcome = await run_task(big)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert "limit" in outcome.failure.message


def test_executor_process_as_a_string_points_to_the_instance() -> None:
    from chongming import ConfigurationError

    def sync(ctx: object) -> None:
        return None

    with pytest.raises(ConfigurationError, match=r"executor=ProcessExecutor\("):
        TaskRun(sync, executor="process")
