"""One trace across processes: enqueued inside a span here, run by a worker process there.

The test process enqueues with an in-memory SDK exporter; a worker process
(tests/web/traced_worker.py) claims and runs the tasks, its spans written to
a file. The attempt span over there must be in the enqueuing span's trace,
its child; so must every attempt of a retried task; a task enqueued outside
any span starts a trace of its own. On SQLite and PostgreSQL, with the
started claim and with the plain one (a worker under a per-bucket limit).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chongming import Controller, TaskStatus
from chongming.stores.base import TaskStore
from chongming.web.tracing import ATTEMPT_SPAN, STEP_SPAN, ChongmingTracing
from tests.stores.pg_support import REPO, drop_schema, fresh_name, require_postgres
from tests.web.traced_worker import INNER_SPAN

DEADLINE = 30.0


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, the file or DSN, the schema) of a store both processes open."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "tasks.db"), ""
        return
    dsn = require_postgres()
    schema = fresh_name("trc")
    try:
        yield "postgres", dsn, schema
    finally:
        asyncio.run(drop_schema(schema))


def _store(kind: str, location: str, schema: str) -> TaskStore | str:
    if kind == "sqlite":
        return location
    from chongming.stores.postgres import PostgresTaskStore

    return PostgresTaskStore(location, schema=schema)


def _start(arguments: list[str]) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = REPO
    return subprocess.Popen(
        [sys.executable, "-m", "tests.web.traced_worker", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=env,
    )


def _ready(worker: subprocess.Popen[bytes]) -> None:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    if line.strip() != b"ready":
        worker.kill()
        _, errors = worker.communicate(timeout=DEADLINE)
        raise AssertionError(f"the worker did not start: {line!r} {errors.decode()[-2000:]}")


def _finish(worker: subprocess.Popen[bytes]) -> bytes:
    if worker.poll() is None:
        worker.kill()
    _, errors = worker.communicate(timeout=DEADLINE)
    return errors


@pytest.mark.parametrize("limited", [False, True], ids=["started-claim", "plain-claim"])
async def test_the_attempt_on_another_process_is_a_child_of_the_enqueuing_span(
    where: tuple[str, str, str], limited: bool, tmp_path: Path
) -> None:
    kind, location, schema = where
    spans_file = tmp_path / "worker-spans.jsonl"
    arguments = [kind, location, schema or "-", str(spans_file), "worker-t"]
    worker = _start(arguments + (["--limited"] if limited else []))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    request_tracer = provider.get_tracer("the web app")
    try:
        await asyncio.to_thread(_ready, worker)
        client = Controller(
            store=_store(kind, location, schema),
            owner="client",
            observers=[ChongmingTracing(provider)],
        )
        async with client:
            with request_tracer.start_as_current_span("POST /orders") as request_span:
                traced = await client.enqueue("traced", task_id="t-1")
                flaky = await client.enqueue("flaky", task_id="f-1")
                journey = await client.enqueue("journey", task_id="j-1")
            alone = await client.enqueue("traced", task_id="u-1")  # outside any span
            finals = [await task.wait(timeout=DEADLINE) for task in (traced, flaky, alone, journey)]
            await client.close(close_store=True)
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, DEADLINE)
    finally:
        errors = _finish(worker)
        provider.shutdown()
    assert code == 0, errors.decode()[-2000:]
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 4
    assert {final.owner for final in finals} == {"worker-t"}
    assert finals[1].attempt == 2

    lines = spans_file.read_text().splitlines()
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]
    attempts: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["name"] == ATTEMPT_SPAN:
            attempts.setdefault(record["attributes"]["chongming.task.id"], []).append(record)
    request = request_span.get_span_context()
    trace_id, span_id = f"{request.trace_id:032x}", f"{request.span_id:016x}"
    for task_id, count in (("t-1", 1), ("f-1", 2)):
        assert len(attempts[task_id]) == count
        for attempt in attempts[task_id]:
            assert attempt["trace_id"] == trace_id  # one trace across the two processes
            assert attempt["parent_span_id"] == span_id  # a child of the enqueuing span
            assert attempt["parent_remote"] is True
            assert attempt["attributes"]["chongming.task.owner"] == "worker-t"
    [inner] = [r for r in records if r["name"] == INNER_SPAN and r["trace_id"] == trace_id]
    assert inner["parent_span_id"] == attempts["t-1"][0]["span_id"]
    # A durable task's step is a span under its attempt, in the same trace, and the
    # task's ctx.trace_id in the worker process named that trace.
    [journey_attempt] = attempts["j-1"]
    assert journey_attempt["trace_id"] == trace_id
    [step] = [r for r in records if r["name"] == STEP_SPAN]
    assert step["trace_id"] == trace_id
    assert step["parent_span_id"] == journey_attempt["span_id"]
    assert step["attributes"]["chongming.step.name"] == "book"
    assert finals[3].result == trace_id
    [own] = attempts["u-1"]
    assert own["parent_span_id"] is None  # enqueued outside a span: a trace of its own
    assert own["trace_id"] != trace_id
    # The enqueuing side exported its request span; nothing else of its is in that trace.
    here = [s for s in exporter.get_finished_spans() if s.context.trace_id == request.trace_id]
    assert [s.name for s in here] == ["POST /orders"]
