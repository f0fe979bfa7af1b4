"""docs/examples/aiohttp_app.py on aiohttp's own test server (a real socket on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from chongming import Controller, ControlWindows, TaskStatus

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "aiohttp_app.py"
pytestmark = pytest.mark.example("aiohttp_app.py")
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)
BOUND = 10.0

Client = TestClient[web.Request, web.Application]


def load_example(path: Path) -> ModuleType:
    """Import the example from its file, as ``python docs/examples/...`` would find it."""
    spec = importlib.util.spec_from_file_location(f"docs_example_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = load_example(EXAMPLE)


def make_app(**options: Any) -> web.Application:
    app: web.Application = example.create_app(windows=FAST, **options)
    return app


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[Client]:
    """Start the app (running its cleanup contexts) on a free port; clean up after."""
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def wait_job(client: Client, task_id: str, status: str) -> dict[str, Any]:
    """Poll ``GET /jobs/{id}`` (what a real client does) until ``status``; bounded."""
    deadline = time.monotonic() + BOUND
    while True:
        response = await client.get(f"/jobs/{task_id}")
        body: dict[str, Any] = await response.json()
        if body["status"] == status:
            return body
        assert time.monotonic() < deadline, f"{task_id} is {body['status']}, not {status}"
        await asyncio.sleep(0.01)


async def test_submit_queues_behind_the_limit_then_succeeds_with_the_result() -> None:
    async with serve(make_app(max_parallel=1)) as client:
        blocker = await client.post(
            "/jobs", json={"task": "count_to", "args": [100_000], "task_id": "blocker"}
        )
        assert blocker.status == 201, await blocker.text()
        await wait_job(client, "blocker", "running")

        job = {"task": "count_to", "args": [3, 0.001], "task_id": "job-1", "label": "三"}
        response = await client.post("/jobs", json=job)
        assert response.status == 201, await response.text()
        body = await response.json()
        assert (body["task_id"], body["label"], body["status"]) == ("job-1", "三", "queued")

        stop = await client.post("/jobs/blocker/stop")
        assert await stop.json() == {"issued": True, "status": "stopping"}
        await wait_job(client, "blocker", "stopped")

        done = await wait_job(client, "job-1", "succeeded")
        assert done["result"] == 3
        assert done["progress"] == {"done": 3, "total": 3, "unit": None, "message": None}


async def test_stop_a_long_job_and_stop_again() -> None:
    async with serve(make_app(max_parallel=2)) as client:
        await client.post("/jobs", json={"task": "count_to", "args": [100_000], "task_id": "long"})
        await wait_job(client, "long", "running")
        first = await client.post("/jobs/long/stop")
        assert (await first.json())["issued"] is True
        stopped = await wait_job(client, "long", "stopped")
        assert stopped["result"] is None
        again = await client.post("/jobs/long/stop")
        assert await again.json() == {"issued": False, "status": "stopped"}


async def test_bad_inputs_get_client_errors_with_the_reason() -> None:
    app = make_app()
    async with serve(app) as client:
        unknown = await client.post("/jobs", json={"task": "rm -rf /", "args": []})
        assert unknown.status == 422
        assert "registered names: count_to" in (await unknown.json())["detail"]

        ok = await client.post("/jobs", json={"task": "count_to", "args": [1], "task_id": "dup"})
        assert ok.status == 201
        duplicate = await client.post(
            "/jobs", json={"task": "count_to", "args": [1], "task_id": "dup"}
        )
        assert duplicate.status == 409

        too_many = await client.post("/jobs", json={"task": "count_to", "args": [1, 2, 3, 4]})
        assert too_many.status == 422
        assert "arguments do not fit" in (await too_many.json())["detail"]

        nan = await client.post(
            "/jobs",
            data=b'{"task": "count_to", "args": [NaN]}',
            headers={"content-type": "application/json"},
        )
        assert nan.status == 422, await nan.text()
        broken = await client.post(
            "/jobs", data=b"{not json", headers={"content-type": "application/json"}
        )
        assert broken.status == 400
        not_a_list = await client.post("/jobs", json={"task": "count_to", "args": "1"})
        assert not_a_list.status == 422
        code = await client.post("/jobs", json={"task": "count_to", "fn": "os.system"})
        assert code.status == 422
        assert (await code.json())["detail"] == "unknown fields: fn"
        bad_id = await client.post("/jobs", json={"task": "count_to", "args": [1], "task_id": ""})
        assert bad_id.status == 422

        assert (await client.get("/jobs/missing")).status == 404
        assert (await client.post("/jobs/missing/stop")).status == 404
        controller: Controller = app[example.CONTROLLER]
        assert [s.task_id for s in await controller.list_tasks()] == ["dup"]


async def test_cleanup_stops_what_is_still_running() -> None:
    app = make_app(max_parallel=1)
    async with serve(app) as client:
        await client.post("/jobs", json={"task": "count_to", "args": [100_000], "task_id": "a"})
        await client.post("/jobs", json={"task": "count_to", "args": [1], "task_id": "b"})
        await wait_job(client, "a", "running")
        controller: Controller = app[example.CONTROLLER]
        running, queued = controller.run_for("a"), controller.run_for("b")
    assert running.status is TaskStatus.STOPPED
    assert queued.status is TaskStatus.STOPPED
    assert queued.snapshot.started_at is None
    assert asyncio.all_tasks() == {asyncio.current_task()}
