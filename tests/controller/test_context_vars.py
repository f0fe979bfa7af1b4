"""Each attempt runs in a copy of the context its task was submitted from.

As with ``asyncio.create_task`` at submit: a request-scoped value (a
request id, a logging binding, a trace span) set by the caller reaches the
task; what one task sets reaches neither the next task to take its slot nor
its own next attempt; what the caller sets after submitting is not seen.
"""

from __future__ import annotations

import asyncio
import contextvars

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskStatus, run_task

REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="unset")


async def sets_and_reads(ctx: object, value: str) -> str:
    seen = REQUEST.get()
    REQUEST.set(value)
    return seen


async def reads(ctx: object) -> str:
    return REQUEST.get()


async def test_a_task_sees_its_submitters_value_not_the_previous_tasks() -> None:
    # One slot: the second task is dispatched when the first gives its slot back,
    # from inside the first task's end.
    async with Controller(max_parallel=1) as controller:
        controller.register("sets", sets_and_reads)
        controller.register("reads", reads)
        REQUEST.set("request-1")
        first = await controller.submit("sets", "set-by-the-first-task")
        REQUEST.set("request-2")
        second = await controller.submit("reads")
        REQUEST.set("after-submit")
        assert (await first.wait(5)).value == "request-1"
        assert (await second.wait(5)).value == "request-2"
    assert REQUEST.get() == "after-submit"  # a task's set never reaches its caller


async def test_each_attempt_starts_from_the_submitters_context() -> None:
    seen: list[str] = []

    async def flaky(ctx: object) -> str:
        seen.append(REQUEST.get())
        REQUEST.set(f"set-by-attempt-{len(seen)}")
        if len(seen) < 3:
            raise RuntimeError("try again")
        return REQUEST.get()

    async with Controller(max_parallel=1) as controller:
        controller.register(
            "flaky",
            flaky,
            retry=RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(base=0.001)),
        )
        REQUEST.set("request")
        run = await controller.submit("flaky")
        outcome = await run.wait(5)
    assert outcome.status is TaskStatus.SUCCEEDED
    assert outcome.value == "set-by-attempt-3"
    assert seen == ["request", "request", "request"]


async def test_many_tasks_on_few_slots_keep_their_own_values() -> None:
    async def echo_later(ctx: object) -> str:
        before = REQUEST.get()
        await asyncio.sleep(0)
        REQUEST.set("clobbered")
        return before

    async with Controller(max_parallel=3) as controller:
        controller.register("echo", echo_later)
        runs = []
        for i in range(30):
            REQUEST.set(f"request-{i}")
            runs.append(await controller.submit("echo"))
        outcomes = [await run.wait(5) for run in runs]
    assert [o.value for o in outcomes] == [f"request-{i}" for i in range(30)]


async def test_run_task_alone_also_runs_in_its_callers_context() -> None:
    REQUEST.set("standalone")
    outcome = await run_task(sets_and_reads, "inside")
    assert outcome.value == "standalone"
    assert REQUEST.get() == "standalone"


def read_in_thread(ctx: object) -> str:
    return REQUEST.get()


async def test_a_thread_task_sees_its_submitters_value() -> None:
    async with Controller(max_parallel=1) as controller:
        controller.register("sets", sets_and_reads)
        controller.register("thread", read_in_thread)
        REQUEST.set("request-1")
        first = await controller.submit("sets", "set-by-the-first-task")
        REQUEST.set("request-2")
        second = await controller.submit("thread")
        assert (await first.wait(5)).value == "request-1"
        assert (await second.wait(5)).value == "request-2"


async def test_an_ended_task_lets_go_of_its_submitters_context() -> None:
    # A finished run may be kept a long while (keep_finished): it must not keep
    # what the submitter's context holds (a request object, a session) alive.
    holder: contextvars.ContextVar[object] = contextvars.ContextVar("holder")
    async with Controller(max_parallel=1, keep_finished=10) as controller:
        controller.register("reads", reads)
        holder.set(object())
        run = await controller.submit("reads")
        assert holder in run.caller_context  # taken at submit, for the attempts
        await run.wait(5)
        assert controller.run_for(run.task_id) is run
        assert holder not in run.caller_context
