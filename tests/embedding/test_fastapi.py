"""docs/examples/fastapi_app.py through an ASGI client, and once under real uvicorn."""

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

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from chongming import Controller, ControlWindows, TaskStatus

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "fastapi_app.py"
pytestmark = pytest.mark.example("fastapi_app.py")
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)
BOUND = 10.0


def load_example(path: Path) -> ModuleType:
    """Import the example from its file, as ``python docs/examples/...`` would find it."""
    spec = importlib.util.spec_from_file_location(f"docs_example_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the model's annotations here
    spec.loader.exec_module(module)
    return module


example = load_example(EXAMPLE)


def make_app(**options: Any) -> FastAPI:
    app: FastAPI = example.create_app(windows=FAST, **options)
    return app


@asynccontextmanager
async def asgi_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Run the app's lifespan around an in-process client (ASGITransport runs none)."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobs.test") as client:
            yield client


async def wait_job(client: httpx.AsyncClient, task_id: str, status: str) -> dict[str, Any]:
    """Poll ``GET /jobs/{id}`` (what a real client does) until ``status``; bounded."""
    deadline = time.monotonic() + BOUND
    while True:
        response = await client.get(f"/jobs/{task_id}")
        body: dict[str, Any] = response.json()
        if body["status"] == status:
            return body
        assert time.monotonic() < deadline, f"{task_id} is {body['status']}, not {status}"
        await asyncio.sleep(0.01)


async def test_submit_queues_behind_the_limit_then_succeeds_with_the_result() -> None:
    async with asgi_client(make_app(max_parallel=1)) as client:
        blocker = await client.post(
            "/jobs", json={"task": "count_to", "args": [100_000], "task_id": "blocker"}
        )
        assert blocker.status_code == 201, blocker.text
        await wait_job(client, "blocker", "running")

        job = {"task": "count_to", "args": [3, 0.001], "task_id": "job-1", "label": "三"}
        response = await client.post("/jobs", json=job)
        assert response.status_code == 201, response.text
        body = response.json()
        assert (body["task_id"], body["label"], body["status"]) == ("job-1", "三", "queued")
        assert body["started_at"] is None

        stop = await client.post("/jobs/blocker/stop")
        assert stop.status_code == 200
        assert stop.json() == {"issued": True, "status": "stopping"}
        await wait_job(client, "blocker", "stopped")

        done = await wait_job(client, "job-1", "succeeded")
        assert done["result"] == 3
        assert done["progress"] == {"done": 3, "total": 3, "unit": None, "message": None}
        assert done["attempt"] == 1
        assert done["failure"] is None


async def test_stop_a_long_job_and_stop_again() -> None:
    async with asgi_client(make_app(max_parallel=2)) as client:
        await client.post("/jobs", json={"task": "count_to", "args": [100_000], "task_id": "long"})
        await wait_job(client, "long", "running")
        first = await client.post("/jobs/long/stop")
        assert first.json()["issued"] is True
        stopped = await wait_job(client, "long", "stopped")
        assert stopped["result"] is None
        assert stopped["finished_at"] is not None
        again = await client.post("/jobs/long/stop")
        assert again.status_code == 200
        assert again.json() == {"issued": False, "status": "stopped"}


async def test_bad_inputs_get_client_errors_with_the_reason() -> None:
    app = make_app()
    async with asgi_client(app) as client:
        unknown = await client.post("/jobs", json={"task": "rm -rf /", "args": []})
        assert unknown.status_code == 422
        assert "registered names: count_to" in unknown.json()["detail"]

        ok = await client.post("/jobs", json={"task": "count_to", "args": [1], "task_id": "dup"})
        assert ok.status_code == 201
        duplicate = await client.post(
            "/jobs", json={"task": "count_to", "args": [1], "task_id": "dup"}
        )
        assert duplicate.status_code == 409
        assert "'dup'" in duplicate.json()["detail"]

        too_many = await client.post("/jobs", json={"task": "count_to", "args": [1, 2, 3, 4]})
        assert too_many.status_code == 422
        assert "arguments do not fit" in too_many.json()["detail"]

        not_json = await client.post(
            "/jobs",
            content=b'{"task": "count_to", "args": [NaN]}',
            headers={"content-type": "application/json"},
        )
        assert not_json.status_code == 422, not_json.text

        bad_id = await client.post(
            "/jobs", json={"task": "count_to", "args": [1], "task_id": "a\x1b[31mb"}
        )
        assert bad_id.status_code == 422

        not_a_list = await client.post("/jobs", json={"task": "count_to", "args": "1"})
        assert not_a_list.status_code == 422
        code = await client.post("/jobs", json={"task": "count_to", "args": [1], "fn": "os.system"})
        assert code.status_code == 422  # unknown fields are refused, not ignored

        assert (await client.get("/jobs/missing")).status_code == 404
        assert (await client.post("/jobs/missing/stop")).status_code == 404
        # Nothing that was refused was queued.
        controller: Controller = app.state.controller
        assert [s.task_id for s in await controller.list_tasks()] == ["dup"]


async def test_shutdown_stops_what_is_still_running() -> None:
    app = make_app(max_parallel=1)
    async with asgi_client(app) as client:
        await client.post("/jobs", json={"task": "count_to", "args": [100_000], "task_id": "a"})
        await client.post("/jobs", json={"task": "count_to", "args": [1], "task_id": "b"})
        await wait_job(client, "a", "running")
        controller: Controller = app.state.controller
        running, queued = controller.run_for("a"), controller.run_for("b")
    assert running.status is TaskStatus.STOPPED
    assert queued.status is TaskStatus.STOPPED
    assert queued.snapshot.started_at is None


async def test_under_uvicorn_on_localhost() -> None:
    app = make_app(max_parallel=2)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, lifespan="on", log_config=None, access_log=False
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        deadline = time.monotonic() + BOUND
        while not server.started:
            assert not serving.done(), "uvicorn exited during startup"
            assert time.monotonic() < deadline, "uvicorn did not start"
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            submitted = await client.post(
                "/jobs", json={"task": "count_to", "args": [3, 0.001], "task_id": "web-1"}
            )
            assert submitted.status_code == 201, submitted.text
            assert submitted.json()["status"] in {"queued", "starting", "running"}
            done = await wait_job(client, "web-1", "succeeded")
            assert done["result"] == 3

            await client.post(
                "/jobs", json={"task": "count_to", "args": [100_000], "task_id": "web-long"}
            )
            await wait_job(client, "web-long", "running")
            stop = await client.post("/jobs/web-long/stop")
            assert stop.json()["issued"] is True
            await wait_job(client, "web-long", "stopped")
            assert (await client.get("/jobs/nope")).status_code == 404
            duplicate = await client.post(
                "/jobs", json={"task": "count_to", "args": [1], "task_id": "web-1"}
            )
            assert duplicate.status_code == 409
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, BOUND)
    # The lifespan closed the controller: nothing of it is left on the loop.
    assert asyncio.all_tasks() == {asyncio.current_task()}
