"""The chongming dashboard mounted inside your own FastAPI service, with metrics and traces.

Run it as a demo (it serves on a free loopback port, drives its own pages
through HTTP like a browser would, prints what it saw and exits)::

    python docs/examples/dashboard_app.py

or serve it for real and open http://127.0.0.1:8000/ops/ ::

    uvicorn docs.examples.dashboard_app:app

Needs ``pip install 'chongming[web,otel]'`` (and fastapi).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
from collections.abc import AsyncIterator

import httpx
import uvicorn
from fastapi import FastAPI

from chongming import Controller, TaskContext
from chongming.web import create_app
from chongming.web.metrics import ChongmingMetrics
from chongming.web.tracing import ChongmingTracing

STORE = os.environ.get("CHONGMING_DB") or os.path.join(tempfile.mkdtemp(), "tasks.db")

# One controller for the service: it runs the tasks and feeds the observers.
metrics = ChongmingMetrics()
controller = Controller(store=STORE, owner="orders-api", observers=[metrics, ChongmingTracing()])


async def rebuild_report(ctx: TaskContext, day: str) -> dict[str, str]:
    for step in range(50):
        await ctx.checkpoint()  # where stop and pause from the dashboard take effect
        ctx.progress(step, total=50, unit="pages")
        await asyncio.sleep(0.02)
    return {"day": day}


controller.register("rebuild-report", rebuild_report)


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    async with controller:  # a mounted app gets no lifespan of its own: the host owns it
        yield


app = FastAPI(lifespan=lifespan)
# Your controller and your metrics: the dashboard never closes them.
app.mount("/ops", create_app(controller, metrics=metrics))


@app.post("/reports/{day}")
async def start_report(day: str) -> dict[str, str]:
    run = await controller.submit("rebuild-report", day=day, task_id=f"report-{day}")
    return {"task_id": run.task_id}


async def demo() -> None:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    # A browser's form posts carry the page's Origin; the dashboard refuses a post without it.
    origin = {"origin": f"http://127.0.0.1:{port}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=origin) as client:
        started = (await client.post("/reports/2026-10-02")).json()
        print("submitted", started["task_id"])
        while (await client.get("/ops/api/tasks/report-2026-10-02")).json()["task"][
            "status"
        ] != "running":
            await asyncio.sleep(0.01)
        page = (await client.get("/ops/tasks/report-2026-10-02")).text
        print("task page links under /ops:", 'href="/ops/static/dashboard.css"' in page)
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert csrf is not None
        form = {"kind": "stop", "task_id": "report-2026-10-02", "reason": "demo over"}
        stopped = await client.post("/ops/control", data={**form, "csrf": csrf.group(1)})
        print("stop:", stopped.status_code, stopped.headers["location"])
        while (await client.get("/ops/api/tasks/report-2026-10-02")).json()["task"][
            "status"
        ] != "stopped":
            await asyncio.sleep(0.05)
        history = (await client.get("/ops/api/tasks/report-2026-10-02")).json()["transitions"]
        stop = next(t for t in history if t["trigger"] == "user:stop")
        print("history:", stop["from"], "->", stop["to"], "by", stop["actor"], "-", stop["reason"])
        scrape = (await client.get("/ops/metrics")).text
        line = next(
            row for row in scrape.splitlines() if row.startswith("chongming_transitions_total{")
        )
        print("metrics:", line.split("{")[0], "present")
        forged = await client.post("/ops/control", data=form)  # no CSRF token
        print("without the CSRF token:", forged.status_code)
    server.should_exit = True
    await serving


if __name__ == "__main__":
    asyncio.run(demo())
