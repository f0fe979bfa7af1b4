"""chongming inside FastAPI: the lifespan owns the controller.

Run it with ``python docs/examples/fastapi_app.py`` (uvicorn on 127.0.0.1:8000),
then::

    curl -X POST localhost:8000/jobs -H 'content-type: application/json' \\
         -d '{"task": "count_to", "args": [20], "task_id": "job-1"}'
    curl localhost:8000/jobs/job-1
    curl -X POST localhost:8000/jobs/job-1/stop

Routes:

- ``POST /jobs`` submits a *registered task name* with JSON arguments (names,
  never code: the body cannot reach any other function). 201 with the
  snapshot; 422 for an unknown name or arguments that do not fit; 409 for a
  task id already in use.
- ``GET /jobs/{task_id}`` is the task's snapshot as JSON; 404 if unknown.
- ``POST /jobs/{task_id}/stop`` asks the task to stop; ``{"issued": false}``
  when it had already ended. Poll ``GET`` to see it become ``stopped``.

The controller lives exactly as long as the server: the lifespan enters it on
the server's loop and closes it at shutdown, which stops the tasks still
running and leaves no task or thread behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

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


async def count_to(ctx: TaskContext, n: int, delay: float = 0.01) -> int:
    """The demo task: counts to ``n``, reporting progress, stoppable at every step."""
    for i in range(1, n + 1):
        await ctx.checkpoint()
        ctx.progress(i, total=n)
        await asyncio.sleep(delay)
    return n


class JobRequest(BaseModel):
    """What a client may send. Arguments are positional on purpose: request keys
    spread into ``submit(**...)`` would also reach its own options (``priority``,
    ``tags``, ``retry``), which a client must not set."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="a registered task name")
    args: list[Any] = Field(default_factory=list, description="JSON arguments")
    task_id: str | None = None
    label: str | None = None


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


def create_app(**controller_options: Any) -> FastAPI:
    """An app whose controller is built with ``controller_options`` at startup."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with Controller(**controller_options) as controller:
            controller.register("count_to", count_to)
            app.state.controller = controller
            yield

    app = FastAPI(title="chongming jobs", lifespan=lifespan)

    @app.exception_handler(ChongmingError)
    async def chongming_error(request: Request, error: ChongmingError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=status_for(error))

    def controller_of(request: Request) -> Controller:
        controller: Controller = request.app.state.controller
        return controller

    @app.post("/jobs", status_code=201)
    async def submit_job(job: JobRequest, request: Request) -> dict[str, Any]:
        run = await controller_of(request).submit(
            job.task, *job.args, task_id=job.task_id, label=job.label
        )
        return snapshot_json(run.snapshot)

    @app.get("/jobs/{task_id}")
    async def read_job(task_id: str, request: Request) -> dict[str, Any]:
        return snapshot_json(await controller_of(request).get(task_id))

    @app.post("/jobs/{task_id}/stop")
    async def stop_job(task_id: str, request: Request) -> dict[str, Any]:
        controller = controller_of(request)
        issued = await controller.stop(task_id, reason="stopped through the API")
        return {"issued": issued, "status": (await controller.get(task_id)).status.value}

    return app


app = create_app(max_parallel=4)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
