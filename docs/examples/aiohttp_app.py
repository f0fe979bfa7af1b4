"""chongming inside aiohttp: a ``cleanup_ctx`` owns the controller.

Run it with ``python docs/examples/aiohttp_app.py`` (127.0.0.1:8080), then::

    curl -X POST localhost:8080/jobs -H 'content-type: application/json' \\
         -d '{"task": "count_to", "args": [20], "task_id": "job-1"}'
    curl localhost:8080/jobs/job-1
    curl -X POST localhost:8080/jobs/job-1/stop

The routes and their answers are those of ``fastapi_app.py``: ``POST /jobs``
submits a *registered task name* with JSON arguments (201; 422 for an unknown
name or arguments that do not fit; 409 for a task id in use), ``GET
/jobs/{task_id}`` returns the snapshot (404 if unknown), and ``POST
/jobs/{task_id}/stop`` returns whether a stop request was issued.

The code before the ``yield`` in a cleanup context runs at startup and the
code after it at cleanup, on the application's loop: the controller is
entered there and closed there, which stops the tasks still running.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from chongming import (
    ChongmingError,
    ConfigurationError,
    Controller,
    ControllerClosed,
    DuplicateTask,
    PayloadError,
    TaskContext,
    TaskNotFound,
    TaskSnapshot,
    snapshot_to_json,
)

CONTROLLER = web.AppKey("controller", Controller)


async def count_to(ctx: TaskContext, n: int, delay: float = 0.01) -> int:
    """The demo task: counts to ``n``, reporting progress, stoppable at every step."""
    for i in range(1, n + 1):
        await ctx.checkpoint()
        ctx.progress(i, total=n)
        await asyncio.sleep(delay)
    return n


def snapshot_json(snapshot: TaskSnapshot) -> dict[str, Any]:
    """The snapshot as plain JSON (the same shape the CLI's ``--json`` prints)."""
    return snapshot_to_json(snapshot)


def status_for(error: ChongmingError) -> int:
    """The one place chongming's errors become HTTP statuses."""
    if isinstance(error, TaskNotFound):
        return 404
    if isinstance(error, DuplicateTask):
        return 409
    if isinstance(error, ConfigurationError | PayloadError):
        return 422  # unknown task name, arguments that do not fit or are not JSON, bad id
    if isinstance(error, ControllerClosed):
        return 503
    return 500


def problem(status: int, detail: str) -> web.Response:
    return web.json_response({"detail": detail}, status=status)


@web.middleware
async def chongming_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except ChongmingError as error:
        return problem(status_for(error), str(error))


_FIELDS = {"task", "args", "task_id", "label"}


async def submit_job(request: web.Request) -> web.Response:
    """Arguments are positional on purpose: request keys spread into
    ``submit(**...)`` would also reach its own options (``priority``, ``tags``)."""
    try:
        body = await request.json()
    except json.JSONDecodeError as error:
        return problem(400, f"the body is not JSON: {error}")
    if not isinstance(body, dict):
        return problem(422, "the body must be a JSON object")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        return problem(422, f"unknown fields: {', '.join(unknown)}")
    task, args = body.get("task"), body.get("args", [])
    if not isinstance(task, str):
        return problem(422, "'task' must be a registered task name")
    if not isinstance(args, list):
        return problem(422, "'args' must be a JSON array")
    run = await request.app[CONTROLLER].submit(
        task, *args, task_id=body.get("task_id"), label=body.get("label")
    )
    return web.json_response(snapshot_json(run.snapshot), status=201)


async def read_job(request: web.Request) -> web.Response:
    snapshot = await request.app[CONTROLLER].get(request.match_info["task_id"])
    return web.json_response(snapshot_json(snapshot))


async def stop_job(request: web.Request) -> web.Response:
    controller = request.app[CONTROLLER]
    task_id = request.match_info["task_id"]
    issued = await controller.stop(task_id, reason="stopped through the API")
    status = (await controller.get(task_id)).status.value
    return web.json_response({"issued": issued, "status": status})


def create_app(**controller_options: Any) -> web.Application:
    """An app whose controller is built with ``controller_options`` at startup."""

    async def controller_context(app: web.Application) -> AsyncIterator[None]:
        async with Controller(**controller_options) as controller:
            controller.register("count_to", count_to)
            app[CONTROLLER] = controller
            yield

    app = web.Application(middlewares=[chongming_errors])
    app.cleanup_ctx.append(controller_context)
    app.router.add_post("/jobs", submit_job)
    app.router.add_get("/jobs/{task_id}", read_job)
    app.router.add_post("/jobs/{task_id}/stop", stop_job)
    return app


if __name__ == "__main__":
    web.run_app(create_app(max_parallel=4), host="127.0.0.1", port=8080)
