"""A worker process that traces its attempts into a file of spans.

``python -m tests.web.traced_worker KIND WHERE SCHEMA SPANS OWNER [--limited]``:

KIND is ``sqlite`` (WHERE: the file) or ``postgres`` (WHERE: the DSN, SCHEMA
its schema); SPANS is a file each finished span is appended to as one JSON
line (a SimpleSpanProcessor exports at the span's end, so the file is whole
once this process has exited). ``--limited`` gives it a per-bucket limit, so
it claims ``queued`` (the plain claim) instead of claiming started. Prints
``ready`` once it serves; SIGTERM closes it gracefully.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskContext
from chongming.web.tracing import ChongmingTracing

INNER_SPAN = "inside the task"


class FileExporter(SpanExporter):
    """Each span as a JSON line: ids in hex, the parent's span id, the attributes."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._path.open("a", encoding="utf-8") as file:
            for span in spans:
                context, parent = span.get_span_context(), span.parent
                assert context is not None
                record = {
                    "name": span.name,
                    "trace_id": f"{context.trace_id:032x}",
                    "span_id": f"{context.span_id:016x}",
                    "parent_span_id": None if parent is None else f"{parent.span_id:016x}",
                    "parent_remote": None if parent is None else parent.is_remote,
                    "attributes": dict(span.attributes or {}),
                }
                file.write(json.dumps(record, default=list) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


async def main(kind: str, where: str, schema: str, spans: str, owner: str, limited: bool) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(Path(spans))))
    tracer = provider.get_tracer("the task's own code")

    async def traced(ctx: TaskContext) -> int:
        with tracer.start_as_current_span(INNER_SPAN):
            return 1

    async def journey(ctx: TaskContext) -> str | None:
        await ctx.step("book", _book)  # a step span under this attempt's span
        return ctx.trace_id

    async def flaky(ctx: TaskContext) -> int:
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails on purpose")
        return 2

    store: Any = where
    if kind == "postgres":
        from chongming.stores.postgres import PostgresTaskStore

        store = PostgresTaskStore(where, schema=schema)
    controller = Controller(
        store=store,
        owner=owner,
        work=True,
        poll_interval=0.05,
        max_parallel_per_bucket=4 if limited else None,
        observers=[ChongmingTracing(provider)],
    )
    controller.register("traced", traced)
    controller.register("journey", journey, durable=True)
    controller.register(
        "flaky", flaky, retry=RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with controller:
            print("ready", flush=True)
            await stop.wait()
            await controller.close(close_store=True)
    finally:
        provider.shutdown()


async def _book() -> int:
    return 1


if __name__ == "__main__":
    kind, where, schema, spans, owner = [a for a in sys.argv[1:] if a != "--limited"]
    asyncio.run(main(kind, where, schema, spans, owner, limited="--limited" in sys.argv))
