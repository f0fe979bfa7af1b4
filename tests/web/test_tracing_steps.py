"""Durable calls as spans: each ``ctx.step`` / ``effect`` / ``sleep`` / ``wait_for_fact``
is a child of its attempt's span, replays are marked, and ``ctx.trace_id`` names the trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.trace import StatusCode

from chongming import Controller, ExponentialBackoff, RetryPolicy, StepFailed
from chongming.web.tracing import ATTEMPT_SPAN, STEP_SPAN, ChongmingTracing
from tests.conftest import FAST
from tests.web.test_tracing import provider


async def test_steps_are_children_of_their_attempt_and_replays_are_marked(
    tmp_path: Path,
) -> None:
    tracer_provider, exporter = provider()
    inner_tracer = tracer_provider.get_tracer("the task's own code")
    trace_ids: list[str | None] = []
    calls: list[str] = []

    async def fetch() -> int:
        calls.append("fetch")
        with inner_tracer.start_as_current_span("GET /vendor"):
            return 41

    def crunch(value: int) -> int:  # a plain step: on a worker thread
        calls.append("crunch")
        with inner_tracer.start_as_current_span("crunching"):
            return value + 1

    def refuse() -> None:
        raise ValueError("the vendor said no")

    async def order(ctx: Any) -> int:
        trace_ids.append(ctx.trace_id)
        fetched = await ctx.step("fetch", fetch)
        try:
            await ctx.step("refuse", refuse)
        except StepFailed:
            pass
        if ctx.attempt == 1:
            raise RuntimeError("the worker fell over")  # attempt 2 replays the steps above
        return int(await ctx.step("crunch", crunch, fetched))

    node = Controller(
        store=str(tmp_path / "t.db"), observers=[ChongmingTracing(tracer_provider)], windows=FAST
    )
    node.register(
        "order",
        order,
        durable=True,
        retry=RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01)),
    )
    async with node:
        run = await node.submit("order", task_id="o-1")
        outcome = await run.wait(timeout=10)
    assert outcome.value == 42
    assert calls == ["fetch", "crunch"]  # attempt 2 replayed fetch (and the refusal)

    spans = exporter.get_finished_spans()

    def number(span: Any) -> int:
        return int((span.attributes or {})["chongming.task.attempt"])

    attempts = sorted((s for s in spans if s.name == ATTEMPT_SPAN), key=number)
    assert len(attempts) == 2
    # ctx.trace_id is the attempt span's trace id, in 32 hex digits.
    assert trace_ids == [format(a.context.trace_id, "032x") for a in attempts]
    steps = [s for s in spans if s.name == STEP_SPAN]
    by_attempt: dict[int, list[tuple[str, bool, StatusCode]]] = {}
    for step in sorted(steps, key=lambda s: s.start_time or 0):
        assert step.parent is not None
        parent = next(a for a in attempts if a.context.span_id == step.parent.span_id)
        attributes = step.attributes or {}
        assert attributes["chongming.step.kind"] == "step"
        by_attempt.setdefault(number(parent), []).append(
            (
                str(attributes["chongming.step.name"]),
                bool(attributes["chongming.step.replayed"]),
                step.status.status_code,
            )
        )
    assert by_attempt == {
        1: [("fetch", False, StatusCode.UNSET), ("refuse", False, StatusCode.ERROR)],
        2: [
            ("fetch", True, StatusCode.UNSET),
            ("refuse", True, StatusCode.ERROR),  # the recorded failure, raised again
            ("crunch", False, StatusCode.UNSET),
        ],
    }
    # The task's own spans nest under the step that ran them, on the loop and on a thread.
    step_ids = {s.context.span_id: s for s in steps}
    for name, step_name in (("GET /vendor", "fetch"), ("crunching", "crunch")):
        (own,) = [s for s in spans if s.name == name]
        assert own.parent is not None
        assert (step_ids[own.parent.span_id].attributes or {})["chongming.step.name"] == step_name


async def test_without_tracing_a_task_has_no_trace_id(tmp_path: Path) -> None:
    seen: list[object] = []

    async def plain(ctx: Any) -> int:
        seen.append(ctx.trace_id)
        return int(await ctx.step("one", _one))

    async with Controller(store=str(tmp_path / "t.db"), windows=FAST) as node:
        node.register("plain", plain, durable=True)
        outcome = await (await node.submit("plain")).wait(timeout=10)
    assert outcome.value == 1
    assert seen == [None]


async def _one() -> int:
    return 1
