"""The dashboard on PostgreSQL: the same pages and the same command path as on SQLite."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from chongming import Controller
from chongming.state.status import TaskStatus
from chongming.web import create_app
from tests.conftest import FAST
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres
from tests.web.support import csrf_of, register

pytestmark = pytest.mark.postgres


async def test_the_board_lists_and_stops_a_task_held_by_another_node() -> None:
    dsn = require_postgres()
    from chongming.stores.postgres import PostgresTaskStore

    schema = fresh_name("web")
    try:
        node_store = PostgresTaskStore(dsn, schema=schema)
        node = Controller(
            store=node_store,
            owner="pg-node",
            windows=FAST,
            poll_interval=0.05,
        )
        register(node)
        async with node:
            run = await node.submit("endless", task_id="pg-1", label="on postgres")
            while run.status is not TaskStatus.RUNNING:
                await asyncio.sleep(0.01)
            board_store = PostgresTaskStore(dsn, schema=schema)
            app = create_app(board_store)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport,
                base_url="http://127.0.0.1",
                headers={"origin": "http://127.0.0.1"},
            ) as client:
                listing = (await client.get("/")).text
                assert "pg-1" in listing
                assert "on postgres" in listing
                assert "PostgresTaskStore(" not in listing  # never a repr
                assert f"schema={schema}" in listing  # its location, password redacted
                page = (await client.get("/tasks/pg-1")).text
                sent = await client.post(
                    "/control",
                    data={"kind": "stop", "task_id": "pg-1", "csrf": csrf_of(page)},
                )
                assert sent.status_code == 303
                assert (await run.wait(timeout=10)).status is TaskStatus.STOPPED
                nodes = (await client.get("/nodes")).text
                assert "pg-node" in nodes
            await app.aclose()
            await board_store.close()  # passed in as an instance: still ours
        await node_store.close()
    finally:
        await drop_schema(schema)
