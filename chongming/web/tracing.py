"""OpenTelemetry spans around each attempt and each store write (``opentelemetry-api`` only).

``Controller(observers=[ChongmingTracing()])``. The SDK, its exporters and
sampling stay your choice. Without one (no ``tracer_provider`` given and no
global provider set when the observer is built or its controller is) the
observer is idle: it makes no spans and no attempt or run passes through it,
so it costs nothing per task. Set the SDK up first.

- ``chongming.attempt`` — one per attempt, from its launch to the status it
  ended in, around the coroutine that carries it, so the span is *current*
  inside an ``async def`` task (spans your code opens are its children).
  Its parent is the context that was current when the task was submitted
  here, or, for a task claimed from the queue, the one that was current
  where it was enqueued, in whichever process: a web request that submits or
  enqueues a task and the attempt it caused share one trace. Attributes:
  ``chongming.task.id``, ``chongming.task.name``, ``chongming.task.attempt``,
  ``chongming.task.status`` (at the end), ``chongming.task.owner``. An
  attempt that does not succeed has status ERROR with the failure's kind
  and message.
- ``chongming.step`` — one per durable call of an attempt (``ctx.step``,
  ``ctx.effect``, ``ctx.sleep``, ``ctx.wait_for_fact``), a child of its
  attempt's span and current while it runs (a plain step's thread too, and
  the spans your step opens are its children). Attributes:
  ``chongming.step.kind`` (step, effect, sleep, fact), ``chongming.step.name``,
  ``chongming.step.replayed`` (its recorded outcome was replayed, nothing
  ran); a step that raised has status ERROR. A parked sleep or wait ends its
  span with ``chongming.step.parked``.
- ``chongming.store.write`` — one per batch the write-through sends, a root
  span linked to the attempt spans of the tasks it writes. Attributes:
  ``chongming.write.tasks`` (batch size), ``chongming.write.outcomes``, and
  for a batch of one the task's id, name, attempt and status.

The attempt's trace id reaches its function as ``ctx.trace_id`` (32 hex
digits; also in a worker process of the process executor), for logs that
name it.

Across processes: at ``enqueue`` the current context, if it holds a valid
span, is written with the task as a W3C trace carrier (``traceparent`` and
``tracestate``, at most 1 KiB, in the store's ``trace_carriers`` table, in
the enqueue's own write); the worker that claims it reads it back (one read
per claim, only on a worker that traces) and the attempt spans become
children of the enqueuing span. A carrier is injected even without an SDK
here (the context may come from upstream). Retries on the same node share
that parent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from chongming.controller.observers import Observer
from chongming.errors import TaskCancelled
from chongming.state.status import TaskStatus
from chongming.stores.writes import StateWrite, WriteResult
from chongming.task_api.journal import ParkRequest
from chongming.web.extras import need

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["ATTEMPT_SPAN", "STEP_SPAN", "WRITE_SPAN", "ChongmingTracing"]

ATTEMPT_SPAN = "chongming.attempt"
STEP_SPAN = "chongming.step"
WRITE_SPAN = "chongming.store.write"
#: Links and ids a write span carries at most (a batch holds up to 500 writes).
MAX_LINKS = 32
#: Attempt spans kept for the links of later writes (the oldest are forgotten first).
MAX_REMEMBERED = 10_000
#: The hooks an idle observer (no SDK) leaves out: every one that is per run or per write.
IDLE_HOOKS = frozenset(
    {"registered", "wrap_attempt", "wrap_step", "claimed", "write_started", "write_ended"}
)
_log = logging.getLogger("chongming.tracing")


class ChongmingTracing(Observer):
    """See the module docstring."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        trace = need("opentelemetry.trace", "otel")
        self._context = need("opentelemetry.context", "otel")
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._trace = trace
        self._provider = tracer_provider
        self._propagator = TraceContextTextMapPropagator()
        self.tracer: Tracer = trace.NoOpTracer()
        #: task id -> the context its attempts are children of (submit or enqueue), until its end.
        self._parents: dict[str, Context] = {}
        #: task id -> its current attempt span (write spans link to it).
        self._attempts: dict[str, Span] = {}
        self._look_for_sdk()

    def _look_for_sdk(self) -> None:
        """Idle unless a real tracer provider is there (see the module docstring)."""
        trace = self._trace
        provider = self._provider if self._provider is not None else trace.get_tracer_provider()
        if isinstance(provider, trace.NoOpTracerProvider | trace.ProxyTracerProvider):
            self.idle_hooks = IDLE_HOOKS
            return
        from chongming.controller.support import package_version

        self.tracer = trace.get_tracer("chongming", package_version(), tracer_provider=provider)
        self.idle_hooks = frozenset()

    def attached(self, facts: Callable[[], Any]) -> None:
        if self.idle_hooks:
            self._look_for_sdk()  # the global provider may have been set since
            if self.idle_hooks:
                _log.debug("no OpenTelemetry SDK: chongming tracing is idle")

    # -- trace context across processes --------------------------------------------------

    def trace_carrier(self) -> dict[str, str] | None:
        current = self._context.get_current()
        if not self._trace.get_current_span(current).get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=current)
        return carrier or None

    def claimed(self, run: Any, carrier: Mapping[str, str]) -> None:
        remote = self._propagator.extract(carrier)
        if self._trace.get_current_span(remote).get_span_context().is_valid:
            parents = self._parents
            parents[run.task_id] = remote  # until the write of its end
            if len(parents) > MAX_REMEMBERED:
                del parents[next(iter(parents))]

    def registered(self, run: Any) -> None:
        current = self._context.get_current()
        if current and self._trace.get_current_span(current).get_span_context().is_valid:
            parents = self._parents
            parents[run.task_id] = current  # until the write of its end
            if len(parents) > MAX_REMEMBERED:
                del parents[next(iter(parents))]

    def wrap_attempt(self, run: Any, coro: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        task_id = run.task_id
        span = self.tracer.start_span(
            ATTEMPT_SPAN,
            context=self._parents.get(task_id),
            attributes={
                "chongming.task.id": task_id,
                "chongming.task.name": run.name,
                "chongming.task.attempt": run.attempt,
                "chongming.task.owner": run.owner or "",
            },
        )
        if not span.get_span_context().is_valid:
            return coro  # no SDK: a no-op span has nothing to carry, so add no frame
        return self._traced(run, coro, span)

    async def _traced(self, run: Any, coro: Coroutine[Any, Any, None], span: Span) -> None:
        task_id = run.task_id
        attempts = self._attempts
        attempts[task_id] = span  # until the write of its end links to it
        if len(attempts) > MAX_REMEMBERED:
            del attempts[next(iter(attempts))]
        context = self._context
        attempt = run.current_attempt
        if attempt is not None:
            attempt.trace_id = format(span.get_span_context().trace_id, "032x")
        # attach/detach rather than use_span: no generator-based context manager per attempt.
        token = context.attach(self._trace.set_span_in_context(span))
        try:
            await coro
        except BaseException as error:  # the carrier handles the task's own errors: rare
            span.record_exception(error)
            raise
        finally:
            context.detach(token)
            self._finish(run, span)

    def wrap_step(
        self, run: Any, kind: str, name: str, journal: Any, call: Coroutine[Any, Any, Any]
    ) -> Coroutine[Any, Any, Any]:
        # Started here, in the attempt's flow: its parent is the attempt span, current there.
        span = self.tracer.start_span(
            STEP_SPAN,
            attributes={
                "chongming.task.id": run.task_id,
                "chongming.step.kind": kind,
                "chongming.step.name": name,
            },
        )
        return self._traced_step(span, journal, call)

    async def _traced_step(self, span: Span, journal: Any, call: Coroutine[Any, Any, Any]) -> Any:
        before = journal.replays
        token = self._context.attach(self._trace.set_span_in_context(span))
        try:
            return await call
        except ParkRequest:
            span.set_attribute("chongming.step.parked", True)
            raise
        except (TaskCancelled, asyncio.CancelledError) as error:
            span.set_attribute("chongming.step.ended", type(error).__name__)
            raise
        except BaseException as error:
            span.record_exception(error)
            span.set_status(self._trace.StatusCode.ERROR, f"{type(error).__name__}: {error}")
            raise
        finally:
            self._context.detach(token)
            span.set_attribute("chongming.step.replayed", journal.replays > before)
            span.end()

    def _finish(self, run: Any, span: Span) -> None:
        try:
            status = run.status
            span.set_attributes(
                {"chongming.task.status": status.value, "chongming.task.attempt": run.attempt}
            )
            status_code = self._trace.StatusCode
            if status is TaskStatus.SUCCEEDED:
                span.set_status(status_code.OK)
            elif status not in (TaskStatus.RUNNING, TaskStatus.PAUSED, TaskStatus.PAUSING):
                failure = run.snapshot.failure
                if failure is not None:
                    span.set_attribute("chongming.failure.kind", failure.kind.value)
                    span.set_status(status_code.ERROR, f"{failure.kind.value}: {failure.message}")
                elif status.is_terminal:
                    span.set_status(status_code.ERROR, status.value)
        finally:
            span.end()

    # -- store writes ------------------------------------------------------------------

    def write_started(self, writes: Sequence[StateWrite]) -> object:
        links: list[Any] = []
        get_current_span = self._trace.get_current_span
        for write in writes:
            snapshot = write.snapshot
            task_id = snapshot.task_id
            if snapshot.is_terminal:
                span, parent = self._attempts.pop(task_id, None), self._parents.pop(task_id, None)
            else:
                span, parent = self._attempts.get(task_id), self._parents.get(task_id)
            if len(links) >= MAX_LINKS:
                continue
            if span is not None:
                links.append(self._trace.Link(span.get_span_context()))
            elif parent is not None:
                links.append(self._trace.Link(get_current_span(parent).get_span_context()))
        attributes: dict[str, Any] = {"chongming.write.tasks": len(writes)}
        if len(writes) == 1:
            snapshot = writes[0].snapshot
            attributes.update(
                {
                    "chongming.task.id": snapshot.task_id,
                    "chongming.task.name": snapshot.name,
                    "chongming.task.attempt": snapshot.attempt,
                    "chongming.task.status": snapshot.status.value,
                }
            )
        else:
            attributes["chongming.task.ids"] = [w.snapshot.task_id for w in writes[:MAX_LINKS]]
        # A root span: the flusher's context is whatever was current when it started.
        return self.tracer.start_span(
            WRITE_SPAN,
            context=self._context.Context(),
            links=links,
            attributes=attributes,
        )

    def write_ended(
        self,
        token: object,
        writes: Sequence[StateWrite],
        seconds: float,
        results: Sequence[WriteResult] | None,
        error: BaseException | None,
    ) -> None:
        span: Span | None = token  # type: ignore[assignment]
        if span is None:
            return
        try:
            status_code = self._trace.StatusCode
            if results is None:
                span.set_status(status_code.ERROR, type(error).__name__ if error else "error")
            else:
                outcomes = sorted({result.outcome.value for result in results})
                span.set_attribute("chongming.write.outcomes", outcomes)
                if "failed" in outcomes:
                    span.set_status(status_code.ERROR, "the store refused a write")
        finally:
            span.end()
