"""Regression tests: no run is stranded, whatever user code does (issue 8, cases 1-3, 5, 7).

Each case used to leave a run non-terminal while holding its slot, or to
register a run nobody held, or to produce a record no store accepts.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from chongming import (
    ConfigurationError,
    Controller,
    FailureKind,
    InMemoryTaskStore,
    PayloadError,
    RetryPolicy,
    SqliteTaskStore,
    TaskRun,
    TaskStatus,
    ThreadExecutor,
    Timeout,
)
from chongming.policies import ControlWindows, ExponentialBackoff
from chongming.state.triggers import Trigger
from tests.support import assert_sound, trajectory, wait_for, wait_status

S = TaskStatus
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=1.0)
QUICK = ExponentialBackoff(base=0.01, max_delay=0.01)


# -- case 1: a function that returns while its run is paused ------------------------


async def test_coroutine_returning_while_a_helper_is_parked_succeeds() -> None:
    parked = asyncio.Event()
    finish = asyncio.Event()

    async def body(ctx: Any) -> str:
        async def helper() -> None:
            while True:
                await ctx.checkpoint()
                parked.set()
                await asyncio.sleep(0.001)

        task = asyncio.create_task(helper())
        await finish.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return "done"

    async with Controller(max_parallel=1, windows=FAST) as controller:
        controller.register("body", body)
        run = await controller.submit("body", task_id="a")
        await parked.wait()
        assert await run.pause()
        assert run.status is S.PAUSED
        finish.set()  # the body returns; its helper sits at the checkpoint
        outcome = await run.wait(5)
        assert outcome.ok
        assert outcome.value == "done"
        assert trajectory(run)[-2:] == [
            ("paused", "running", Trigger.PAUSE_RELEASED),
            ("running", "succeeded", Trigger.COMPLETED),
        ]
        assert_sound(run)
        # The slot came back: the next task runs.
        nxt = await controller.submit("body", task_id="b")
        await parked.wait()
        await nxt.stop()
        assert (await nxt.wait(5)).status is S.STOPPED
        await controller.wait_all(5)


async def test_thread_returning_while_a_helper_thread_is_parked_succeeds() -> None:
    parked = threading.Event()
    finish = threading.Event()
    helper_done = threading.Event()

    def body(ctx: Any) -> str:
        def helper() -> None:
            try:
                while not finish.is_set():
                    ctx.checkpoint()
                    parked.set()
                    finish.wait(0.001)
            except Exception:
                pass
            finally:
                helper_done.set()

        thread = threading.Thread(target=helper)
        thread.start()
        finish.wait(10)
        return "done"

    async with Controller(max_parallel=1, windows=FAST) as controller:
        controller.register("body", body)
        run = await controller.submit("body")
        await asyncio.to_thread(parked.wait, 5)
        assert await run.pause()
        finish.set()
        outcome = await run.wait(5)
        assert outcome.ok
        assert ("paused", "running", Trigger.PAUSE_RELEASED) in trajectory(run)
        assert_sound(run)
        # The pause was released, so the parked helper thread ends too.
        assert await asyncio.to_thread(helper_done.wait, 5)


async def test_a_stale_pause_receipt_does_not_mark_the_run_paused() -> None:
    step = threading.Event()
    step.set()
    release = threading.Event()

    def loops(ctx: Any) -> str:
        while not release.is_set():
            ctx.checkpoint()
            step.wait(10)
        return "ok"

    async with TaskRun(loops, windows=FAST) as run:
        await wait_status(run, S.RUNNING)
        assert await run.pause()
        attempt = run._current
        assert attempt is not None
        first = attempt.pause_generation
        step.clear()  # once resumed, the thread waits here, away from any checkpoint
        assert await run.resume()
        pausing = asyncio.ensure_future(run.pause())
        await wait_status(run, S.PAUSING)
        # The receipt of the first pause arrives late, after the resume.
        run.attempt_paused(attempt, first)
        assert run.status is S.PAUSING
        step.set()
        assert await pausing, trajectory(run)[5:]  # the real receipt of the second pause
        release.set()
        assert await run.resume()
        assert (await run.wait(5)).ok
        assert_sound(run)


# -- case 2: user-supplied callables ---------------------------------------------------


def _raising_predicate(error: BaseException) -> bool:
    raise ValueError("predicate broke")


async def test_a_retry_predicate_that_raises_fails_the_task_and_frees_the_slot() -> None:
    async def boom(ctx: Any) -> None:
        raise RuntimeError("first failure")

    async def fine(ctx: Any) -> int:
        return 1

    policy = RetryPolicy(max_attempts=3, backoff=QUICK, retry_on=_raising_predicate)
    async with Controller(max_parallel=1) as controller:
        controller.register("boom", boom, retry=policy)
        controller.register("fine", fine)
        run = await controller.submit("boom")
        after = await controller.submit("fine")
        outcome = await run.wait(5)
        assert outcome.status is S.FAILED
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.EXCEPTION
        assert "retry policy raised ValueError" in outcome.failure.message
        assert "first failure" in outcome.failure.message
        assert (await after.wait(5)).ok
        assert len(await controller.wait_all(5)) == 2
        assert (await controller.stats()).holding_slot == 0


async def test_a_done_callback_that_raises_does_not_keep_the_slot(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fine(ctx: Any) -> int:
        return 1

    def broken(run: TaskRun) -> None:
        raise RuntimeError("callback broke")

    seen: list[str] = []
    async with Controller(max_parallel=1) as controller:
        controller.register("fine", fine)
        first = await controller.submit("fine")
        first.add_done_callback(broken)
        first.add_done_callback(lambda run: seen.append(run.task_id))
        second = await controller.submit("fine")
        assert (await second.wait(5)).ok
        assert seen == [first.task_id]  # the later callback still ran
    assert "a done callback" in caplog.text


async def test_controller_refuses_windows_that_are_not_control_windows() -> None:
    with pytest.raises(ConfigurationError, match="windows"):
        Controller(windows={"stop_grace": 1})  # type: ignore[arg-type]


# -- case 3: validation before anything is registered ------------------------------------


async def test_bad_tags_leave_no_phantom_run() -> None:
    async def fine(ctx: Any) -> int:
        return 1

    async with Controller(resource_limits={"io": 1}) as controller:
        controller.register("fine", fine)
        with pytest.raises(ConfigurationError):
            await controller.submit("fine", task_id="x", tags=["io", 5])  # type: ignore[list-item]
        stats = await controller.stats()
        assert (stats.total, stats.active, stats.queued) == (0, 0, 0)
        assert await controller.wait_all(1) == []
        run = await controller.submit("fine", task_id="x", tags=["io"])  # the id is free
        assert (await run.wait(5)).ok


# -- case 5: records every store accepts ----------------------------------------------------


@pytest.mark.parametrize("message", ["nul \x00 inside", "surrogate \udcff.txt", "both \x00 \ud800"])
async def test_exception_text_is_made_storable(message: str) -> None:
    async def boom(ctx: Any) -> None:
        raise OSError(message)

    async with TaskRun(boom, task_id="t") as run:
        outcome = await run.wait(5)
    assert outcome.failure is not None
    assert "\x00" not in outcome.failure.message
    outcome.failure.message.encode("utf-8")  # valid UTF-8 now
    for store in (InMemoryTaskStore(), SqliteTaskStore(":memory:")):
        async with store:
            await store.create(run.snapshot, run.transitions)
            stored = await store.get("t")
            assert stored is not None
            assert stored.failure == outcome.failure


@pytest.mark.parametrize("reason", ["nul \x00", "lone \udcff", 123, b"bytes"])
async def test_control_reasons_are_checked(reason: Any) -> None:
    started = asyncio.Event()

    async def waits(ctx: Any) -> None:
        started.set()
        while True:
            await ctx.checkpoint()
            await asyncio.sleep(0.001)

    async with TaskRun(waits, windows=FAST) as run:
        await started.wait()
        with pytest.raises(PayloadError, match="reason"):
            await run.stop(reason=reason)
        with pytest.raises(PayloadError, match="reason"):
            await run.pause(reason=reason)
        assert run.status is S.RUNNING  # nothing moved
        assert await run.stop(reason="fine")
        assert (await run.wait(5)).status is S.STOPPED


async def test_huge_integers_are_refused_at_submit_and_as_results() -> None:
    async def echo(ctx: Any, value: Any) -> Any:
        return value

    async def huge(ctx: Any) -> int:
        return 10**5000

    async with Controller() as controller:
        controller.register("echo", echo)
        controller.register("huge", huge)
        for value in (10**5000, [2**64], {"n": -(2**63) - 1}):
            with pytest.raises(PayloadError, match="64 bits"):
                await controller.submit("echo", value)
        assert (await controller.stats()).total == 0
        outcome = await (await controller.submit("huge")).wait(5)
        assert outcome.status is S.FAILED
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.RESULT_INVALID
        edge = await (await controller.submit("echo", [2**63 - 1, -(2**63)])).wait(5)
        assert edge.ok
        assert edge.value == [2**63 - 1, -(2**63)]


async def test_values_take_their_json_form_at_the_boundary() -> None:
    seen: list[Any] = []

    async def echo(ctx: Any, value: Any) -> Any:
        seen.append(value)
        return (value, {1: "one"})

    async with TaskRun(echo, ((1, 2),)) as run:
        outcome = await run.wait(5)
    assert seen == [[1, 2]]  # what any node would receive from a store
    assert run.snapshot.args == ([1, 2],)
    assert outcome.value == [[1, 2], {"1": "one"}]


# -- case 7: threads and the start timeout ------------------------------------------------


async def test_named_thread_executor_uses_the_controllers_bound() -> None:
    parties = 60
    barrier = threading.Barrier(parties, timeout=10)

    def meet(ctx: Any) -> int:
        return barrier.wait()

    async with Controller(max_parallel=parties) as controller:
        controller.register("meet", meet, executor="thread")
        runs = [await controller.submit("meet") for _ in range(parties)]
        outcomes = await controller.wait_all(20)
    # All 60 were in a worker thread at once (a 40-thread pool would break the barrier).
    assert all(o.ok for o in outcomes), [o.failure for o in outcomes if not o.ok]
    assert sorted(o.value for o in outcomes) == list(range(parties))
    assert all(run.done for run in runs)


async def test_thread_by_name_is_the_controllers_executor_and_closes_with_it() -> None:
    gate = threading.Event()
    inside = 0
    peak = 0
    lock = threading.Lock()

    def work(ctx: Any) -> None:
        nonlocal inside, peak
        with lock:
            inside += 1
            peak = max(peak, inside)
        gate.wait(10)
        with lock:
            inside -= 1

    controller = Controller(max_parallel=3, executor=ThreadExecutor(max_workers=1))
    async with controller:
        controller.register("work", work, executor="thread")
        for _ in range(6):
            await controller.submit("work")
        await wait_for(lambda: inside == 1)
        await wait_for(
            lambda: len([r for r in controller._host.runs() if r.status is S.STARTING]) == 2
        )
        gate.set()
        await controller.wait_all(10)
    # "thread" named the controller's own executor (1 worker), not a shared 40-thread pool.
    assert peak == 1
    assert inside == 0  # close returned only once every call had ended


async def test_start_timeout_covers_waiting_for_a_worker_thread() -> None:
    hold = threading.Event()
    ran: list[int] = []

    def blocker(ctx: Any) -> None:
        hold.wait(10)

    def late(ctx: Any) -> None:
        ran.append(1)

    executor = ThreadExecutor(max_workers=1)
    async with Controller(max_parallel=5, executor=executor) as controller:
        controller.register("blocker", blocker)
        controller.register("late", late, timeout=Timeout(start=0.2))
        first = await controller.submit("blocker")
        await wait_status(first, S.RUNNING)
        run = await controller.submit("late")
        await wait_status(run, S.STARTING)  # it holds a slot but waits for the thread
        outcome = await run.wait(5)
        assert outcome.status is S.FAILED
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.TIMEOUT_START
        assert trajectory(run)[-1] == ("starting", "failed", Trigger.START_TIMEOUT)
        hold.set()
        assert (await first.wait(5)).ok
        assert (await controller.stats()).holding_slot == 0
    assert ran == []  # the function never began
    assert_sound(run)
