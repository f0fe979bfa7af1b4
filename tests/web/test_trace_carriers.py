"""Trace carriers at enqueue and claim, in one process: what observers hand over, what is kept.

An enqueue never fails because of an observer: one that raises in
``trace_carrier`` is logged and ignored, and a carrier that is not a
str -> str mapping or is over 1 KiB is dropped (a debug log) while the task
is enqueued. The same carrier given to the store directly is refused with
``PayloadError`` (a caller's bug, not an observer's). The process test is
tests/web/test_tracing_processes.py.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chongming import Controller, TaskStatus
from chongming.controller.observers import Observer, Observers
from chongming.errors import PayloadError
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.queue import MAX_TRACE_CARRIER, Enqueued
from chongming.web.tracing import ATTEMPT_SPAN, IDLE_HOOKS, ChongmingTracing

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Carrying(Observer):
    def __init__(self, carrier: object) -> None:
        self.carrier = carrier

    def trace_carrier(self) -> Any:
        return self.carrier


class Raising(Observer):
    def trace_carrier(self) -> Mapping[str, str] | None:
        raise RuntimeError("observer bug")


async def _carrier_of(store: InMemoryTaskStore, observers: Sequence[Observer]) -> dict[str, str]:
    async with Controller(store=store, observers=observers) as controller:
        queued = await controller.enqueue("unserved", task_id="q-1")
    assert queued.created
    return (await store.trace_carriers(["q-1"])).get("q-1", {})


async def test_the_observers_carriers_are_merged_and_stored_with_the_task() -> None:
    store = InMemoryTaskStore()
    both = [Carrying({"traceparent": TRACEPARENT}), Carrying({"tracestate": "a=1"})]
    assert await _carrier_of(store, both) == {"traceparent": TRACEPARENT, "tracestate": "a=1"}


@pytest.mark.parametrize(
    "carrier",
    [
        "traceparent",
        [("traceparent", TRACEPARENT)],
        {"traceparent": 7},
        {7: TRACEPARENT},
        {"traceparent": "x\x00y"},
        {"traceparent": "x" * MAX_TRACE_CARRIER},
    ],
    ids=["a-string", "pairs", "int-value", "int-key", "nul", "oversized"],
)
async def test_a_bad_carrier_is_dropped_and_the_enqueue_goes_on(
    carrier: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="chongming.observers")
    store = InMemoryTaskStore()
    good = Carrying({"tracestate": "a=1"})
    assert await _carrier_of(store, [Carrying(carrier), good]) == {"tracestate": "a=1"}
    assert any("dropping the trace carrier" in r.message for r in caplog.records)


async def test_carriers_that_together_exceed_the_cap_keep_the_first() -> None:
    store = InMemoryTaskStore()
    first = Carrying({"traceparent": "x" * (MAX_TRACE_CARRIER - 20)})
    second = Carrying({"tracestate": "y" * 30})
    assert await _carrier_of(store, [first, second]) == first.carrier


async def test_an_observer_raising_in_the_hook_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryTaskStore()
    found = await _carrier_of(store, [Raising(), Carrying({"traceparent": TRACEPARENT})])
    assert found == {"traceparent": TRACEPARENT}
    assert any(r.exc_info and "observer bug" in str(r.exc_info[1]) for r in caplog.records)


async def test_the_store_refuses_a_bad_carrier_given_to_it_directly() -> None:
    async with Controller(store=InMemoryTaskStore()) as controller:
        queued = await controller.enqueue("unserved", task_id="q-1")
        store = controller.store
        assert store is not None
        other = dataclasses.replace(queued.snapshot, task_id="q-2")
        with pytest.raises(PayloadError, match="trace_carrier"):
            await store.enqueue(other, trace_carrier={"traceparent": 1})  # type: ignore[dict-item]
        assert await store.get("q-2") is None


class OldStore(InMemoryTaskStore):
    """A third-party store whose ``enqueue`` predates ``trace_carrier``."""

    async def enqueue(  # type: ignore[override]
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
    ) -> Enqueued:
        return await super().enqueue(snapshot, transitions, connection=connection)


async def test_a_store_without_the_parameter_still_enqueues() -> None:
    store = OldStore()
    assert await _carrier_of(store, [Carrying({"traceparent": TRACEPARENT})]) == {}
    assert await store.get("q-1") is not None


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def _job(ctx: object) -> int:
    return 1


async def test_a_worker_here_continues_the_trace_of_an_enqueue_elsewhere() -> None:
    store = InMemoryTaskStore()
    provider, exporter = _provider()
    request_tracer = provider.get_tracer("web")
    client = Controller(store=store, owner="client", observers=[ChongmingTracing(provider)])
    worker = Controller(
        store=store,
        owner="worker",
        work=True,
        poll_interval=0.05,
        observers=[ChongmingTracing(provider)],
    )
    worker.register("job", _job)
    async with client, worker:
        with request_tracer.start_as_current_span("POST /jobs") as request:
            queued = await client.enqueue("job", task_id="j-1")
        assert (await queued.wait(timeout=10)).status is TaskStatus.SUCCEEDED
    [attempt] = [s for s in exporter.get_finished_spans() if s.name == ATTEMPT_SPAN]
    assert attempt.context.trace_id == request.get_span_context().trace_id
    assert attempt.parent is not None
    assert attempt.parent.span_id == request.get_span_context().span_id


class CarrierlessStore(InMemoryTaskStore):
    async def trace_carriers(self, task_ids: Any) -> dict[str, dict[str, str]]:
        raise RuntimeError("no such table: trace_carriers")


async def test_a_failing_carrier_read_leaves_the_claimed_task_running_untraced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = CarrierlessStore()
    provider, exporter = _provider()
    worker = Controller(
        store=store, owner="worker", work=True, observers=[ChongmingTracing(provider)]
    )
    worker.register("job", _job)
    async with worker:
        with provider.get_tracer("web").start_as_current_span("POST /jobs"):
            queued = await worker.enqueue("job", task_id="j-1")
        assert (await queued.wait(timeout=10)).status is TaskStatus.SUCCEEDED
    [attempt] = [s for s in exporter.get_finished_spans() if s.name == ATTEMPT_SPAN]
    assert attempt.parent is None  # its own trace: the carrier could not be read
    assert any("trace carriers" in r.message for r in caplog.records)


async def _noop() -> None:
    return None


async def test_without_an_sdk_the_observer_is_idle_but_still_carries_a_context() -> None:
    tracing = ChongmingTracing()  # no provider given, none set globally
    assert tracing.idle_hooks == IDLE_HOOKS
    fan = Observers([tracing])
    coro: Coroutine[Any, Any, None] = _noop()
    assert fan.wrap_attempt(object(), coro) is coro  # nothing wraps an attempt
    await coro
    assert not fan.follows_carriers  # so a worker reads no carriers
    # A context propagated from upstream is carried on, SDK or not.
    remote = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id=0x0AF7651916CD43DD8448EB211C80319C,
            span_id=0xB7AD6B7169203331,
            is_remote=True,
            trace_flags=trace.TraceFlags(1),
        )
    )
    with trace.use_span(remote):
        assert fan.trace_carrier() == {"traceparent": TRACEPARENT}
    assert fan.trace_carrier() is None  # outside any span: nothing


async def test_an_observer_given_a_provider_is_busy_and_follows_carriers() -> None:
    provider, _ = _provider()
    tracing = ChongmingTracing(provider)
    assert tracing.idle_hooks == frozenset()
    assert Observers([tracing]).follows_carriers
