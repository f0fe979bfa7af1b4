"""OpenTelemetry spans, collected with the SDK's in-memory exporter (a test-only dependency)."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from chongming import Controller
from chongming.web.tracing import ATTEMPT_SPAN, WRITE_SPAN, ChongmingTracing
from tests.conftest import FAST
from tests.web.support import register


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider, exporter


async def test_an_attempt_is_a_span_in_the_trace_of_its_submit(tmp_path: Path) -> None:
    tracer_provider, exporter = provider()
    tracing = ChongmingTracing(tracer_provider)
    request_tracer = tracer_provider.get_tracer("the web app")
    inner: list[trace.SpanContext] = []

    async def traced(ctx: object) -> int:
        # The attempt span is current inside the task: its own spans nest under it.
        with request_tracer.start_as_current_span("inside the task") as span:
            inner.append(span.get_span_context())
        return 1

    node = Controller(store=str(tmp_path / "t.db"), observers=[tracing], windows=FAST)
    register(node)
    node.register("traced", traced)
    async with node:
        with request_tracer.start_as_current_span("POST /orders") as request_span:
            run = await node.submit("traced", task_id="t-1")
        await run.wait(timeout=5)
        broken = await node.submit("broken", task_id="b-1")
        await broken.wait(timeout=5)
    spans = exporter.get_finished_spans()
    attempts = [s for s in spans if s.name == ATTEMPT_SPAN]
    by_id = {s.attributes["chongming.task.id"]: s for s in attempts if s.attributes}
    ok = by_id["t-1"]
    assert ok.context.trace_id == request_span.get_span_context().trace_id
    assert ok.parent is not None
    assert ok.parent.span_id == request_span.get_span_context().span_id
    expected = {
        "chongming.task.id": "t-1",
        "chongming.task.name": "traced",
        "chongming.task.attempt": 1,
        "chongming.task.status": "succeeded",
    }
    assert {key: (ok.attributes or {}).get(key) for key in expected} == expected
    assert ok.status.status_code is StatusCode.OK
    nested = [s for s in spans if s.name == "inside the task"]
    assert nested
    assert nested[0].parent is not None
    assert nested[0].parent.span_id == ok.context.span_id
    failed = by_id["b-1"]
    assert failed.parent is None  # submitted outside any span: a trace of its own
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["chongming.task.status"] == "failed"
    assert "exception" in (failed.status.description or "")
    writes = [s for s in spans if s.name == WRITE_SPAN]
    assert writes, "every store write is a span"
    assert all(s.parent is None for s in writes)  # roots, linked to the attempts they write
    linked = {link.context.span_id for s in writes for link in s.links}
    assert ok.context.span_id in linked
    one = [s for s in writes if (s.attributes or {}).get("chongming.write.tasks") == 1]
    assert one
    assert {"chongming.task.id", "chongming.task.status"} <= set(one[0].attributes or {})
    for span in writes:
        outcomes = (span.attributes or {}).get("chongming.write.outcomes")
        assert isinstance(outcomes, tuple | list)
        assert "written" in outcomes


async def test_without_an_sdk_spans_are_no_ops_and_tasks_run() -> None:
    tracing = ChongmingTracing()  # the global provider: the API's no-op unless configured
    async with Controller(observers=[tracing]) as controller:

        async def job(ctx: object) -> int:
            return 2

        controller.register("job", job)
        run = await controller.submit("job")
        assert (await run.wait(timeout=5)).value == 2
