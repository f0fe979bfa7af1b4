"""docs/examples/orders_service.py with a real ``chongming worker`` process running orders_tasks.

The service runs in process (httpx's ASGI transport, its lifespan entered by
hand); the worker is its own interpreter, as in production. A placed order's
shipment runs on the worker; an order rolled back after its enqueue leaves no
task anywhere.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from chongming import TaskQuery
from tests.embedding.test_fastapi import load_example
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
pytestmark = [pytest.mark.example("orders_service.py"), pytest.mark.example("orders_tasks.py")]
DEADLINE = 30.0

example = load_example(EXAMPLES / "orders_service.py")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    """Where the service and the worker meet: a SQLite file, or a DSN and a schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "orders.db"), None
        return
    dsn = require_postgres()
    schema = fresh_name("orders")
    try:
        yield dsn, schema
    finally:
        asyncio.run(drop_schema(schema))


@asynccontextmanager
async def service(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop.test") as client:
            yield client


def start_worker(database: str, schema: str | None) -> subprocess.Popen[str]:
    """``chongming worker --tasks orders_tasks``, importing the module from docs/examples."""
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLES), str(ROOT)])
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing written into docs/examples
    where = ["--db", database, *(["--schema", schema] if schema else [])]
    command = ["worker", "--tasks", "orders_tasks", "--max-parallel", "4", "--grace", "5"]
    return subprocess.Popen(
        [sys.executable, "-m", "chongming", *where, "--owner", "shipper", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


async def shipped(client: httpx.AsyncClient, order_id: str) -> dict[str, Any]:
    """Poll ``GET /orders/{id}`` (as a client would) until its shipment ended; bounded."""
    deadline = time.monotonic() + DEADLINE
    while True:
        response = await client.get(f"/orders/{order_id}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["shipping"] in ("succeeded", "failed", "stopped", "lost"):
            return body
        assert time.monotonic() < deadline, f"{order_id} is still {body['shipping']}"
        await asyncio.sleep(0.02)


async def test_orders_ship_on_the_worker_and_a_rolled_back_order_leaves_no_task(
    database: tuple[str, str | None],
) -> None:
    where, schema = database
    app: FastAPI = example.create_app(where, schema=schema)
    async with service(app) as client:  # the store and the tables exist before the worker
        worker = start_worker(where, schema)
        try:
            assert worker.stdout is not None
            first = await asyncio.to_thread(worker.stdout.readline)
            assert first.startswith("worker shipper serving ship-order"), first

            placed = await client.post(
                "/orders", json={"order_id": "o-1", "item": "tea", "quantity": 2}
            )
            assert placed.status_code == 201, placed.text
            assert placed.json() == {"order_id": "o-1", "task_id": "ship-o-1"}
            body = await shipped(client, "o-1")
            assert body["shipping"] == "succeeded"
            assert body["label"] == "label for o-1: 2 x tea"

            # enqueued, then out of stock: the rollback takes the order and its task
            short = await client.post(
                "/orders", json={"order_id": "o-2", "item": "cups", "quantity": 5}
            )
            assert short.status_code == 409, short.text
            assert short.json() == {"detail": "not enough cups in stock"}
            assert (await client.get("/orders/o-2")).status_code == 404
            again = await client.post(
                "/orders", json={"order_id": "o-1", "item": "tea", "quantity": 1}
            )
            assert again.status_code == 409, again.text

            for n in range(3, 6):
                order = {"order_id": f"o-{n}", "item": "cups", "quantity": 1}
                assert (await client.post("/orders", json=order)).status_code == 201
            for n in range(3, 6):
                assert (await shipped(client, f"o-{n}"))["shipping"] == "succeeded"

            tasks = await app.state.client.list_tasks(TaskQuery())  # the whole store
            assert sorted(t.task_id for t in tasks) == [
                "ship-o-1",
                "ship-o-3",
                "ship-o-4",
                "ship-o-5",
            ]
            assert {t.owner for t in tasks} == {"shipper"}
            worker.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(worker.wait, DEADLINE) == 0
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(DEADLINE)
            out, err = worker.communicate()
        assert out.strip().splitlines()[-1] == "worker shipper stopped", (out, err)
