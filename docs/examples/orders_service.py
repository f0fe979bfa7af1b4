"""A web service that enqueues its work inside its own database transaction.

Placing an order writes the order row, enqueues the task that ships it, and
takes the items from stock, all in ONE transaction of the service's own
database connection: the shipping task exists if and only if the order does.
An order that fails after the enqueue (out of stock, say) rolls back, and the
task goes with it; no worker ever sees it. A separate worker process
(docs/examples/orders_tasks.py) runs the shipments.

The business tables live in the same database as the task store: one SQLite
file by default, or one PostgreSQL database (``ORDERS_DATABASE=postgresql://...``).
Run it from this directory::

    chongming --db orders.db worker --tasks orders_tasks &   # the worker process
    ORDERS_DATABASE=orders.db uvicorn orders_service:app      # the service
    curl -X POST localhost:8000/orders -H 'content-type: application/json' \\
         -d '{"order_id": "o-1", "item": "tea", "quantity": 2}'
    curl localhost:8000/orders/o-1

Routes: ``POST /orders`` (201 with the task id; 409 when the order exists or
the stock is short, and then nothing was written); ``GET /orders/{id}`` (the
order and its shipment as the store has it; 404 if there is no such order).

SQLite has one writer at a time: while a request's transaction is open, the
store's own writes and the worker's claims wait for it, so the transaction
is short and begins with ``BEGIN IMMEDIATE`` (it waits for the lock at its
start instead of failing midway).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite
from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from chongming import Controller, TaskNotFound

STOCK = {"tea": 10, "cups": 3}


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,40}$")
    item: str
    quantity: int = Field(gt=0)


async def place_order(conn: aiosqlite.Connection, client: Controller, order: Order) -> str:
    """The order, its shipping task and the stock it takes, inside the open transaction."""
    task_id = f"ship-{order.order_id}"
    try:
        await conn.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?)",
            (order.order_id, order.item, order.quantity, task_id),
        )
    except sqlite3.IntegrityError:
        raise HTTPException(409, f"order {order.order_id} exists") from None
    await client.enqueue(
        "ship-order",
        order.order_id,
        order.item,
        order.quantity,
        task_id=task_id,
        connection=conn,
    )
    taken = await conn.execute(
        "UPDATE stock SET available = available - ? WHERE item = ? AND available >= ?",
        (order.quantity, order.item, order.quantity),
    )
    if taken.rowcount != 1:  # the rollback takes the order and its task with it
        raise HTTPException(409, f"not enough {order.item} in stock")
    return task_id


class SqliteShop:
    """The business tables in the store's SQLite file, through one aiosqlite connection.

    One connection and a lock: SQLite runs one write transaction at a time anyway.
    """

    def __init__(self, path: str) -> None:
        self.store = path
        self._path = path
        self._lock = asyncio.Lock()
        self._conn: aiosqlite.Connection | None = None

    async def open(self) -> None:
        self._conn = await aiosqlite.connect(self._path, isolation_level=None)
        await self._conn.executescript(
            "CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, item TEXT NOT NULL,"
            " quantity INTEGER NOT NULL, task_id TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS stock (item TEXT PRIMARY KEY, available INTEGER NOT NULL);"
        )
        await self._conn.executemany(
            "INSERT OR IGNORE INTO stock VALUES (?, ?)", list(STOCK.items())
        )

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        assert self._conn is not None
        async with self._lock:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    async def place(self, client: Controller, order: Order) -> str:
        async with self.transaction() as conn:
            return await place_order(conn, client, order)

    async def order(self, order_id: str) -> dict[str, Any] | None:
        assert self._conn is not None
        async with self._lock:
            rows = list(
                await self._conn.execute_fetchall(
                    "SELECT order_id, item, quantity, task_id FROM orders WHERE order_id = ?",
                    (order_id,),
                )
            )
        columns = ("order_id", "item", "quantity", "task_id")
        return dict(zip(columns, rows[0], strict=True)) if rows else None


class PostgresShop:
    """The business tables in the store's PostgreSQL database, through an asyncpg pool."""

    def __init__(self, dsn: str, schema: str | None) -> None:
        from chongming.stores.postgres import PostgresTaskStore

        self.store: Any = dsn if schema is None else PostgresTaskStore(dsn, schema=schema)
        self._dsn = dsn
        self._prefix = "" if schema is None else f'"{schema}".'
        self._pool: Any = None

    async def open(self) -> None:
        import asyncpg

        self._pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=4)
        p = self._prefix
        async with self._pool.acquire() as conn:
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {p}orders (order_id text PRIMARY KEY,"
                " item text NOT NULL, quantity int NOT NULL, task_id text NOT NULL);"
                f"CREATE TABLE IF NOT EXISTS {p}stock (item text PRIMARY KEY,"
                " available int NOT NULL)"
            )
            await conn.executemany(
                f"INSERT INTO {p}stock VALUES ($1, $2) ON CONFLICT DO NOTHING", list(STOCK.items())
            )

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()

    async def place(self, client: Controller, order: Order) -> str:
        import asyncpg

        task_id, p = f"ship-{order.order_id}", self._prefix
        async with self._pool.acquire() as conn, conn.transaction():
            try:
                await conn.execute(
                    f"INSERT INTO {p}orders VALUES ($1, $2, $3, $4)",
                    order.order_id,
                    order.item,
                    order.quantity,
                    task_id,
                )
            except asyncpg.UniqueViolationError:
                raise HTTPException(409, f"order {order.order_id} exists") from None
            await client.enqueue(
                "ship-order",
                order.order_id,
                order.item,
                order.quantity,
                task_id=task_id,
                connection=conn,
            )
            taken = await conn.execute(
                f"UPDATE {p}stock SET available = available - $1"
                " WHERE item = $2 AND available >= $1",
                order.quantity,
                order.item,
            )
            if taken != "UPDATE 1":  # the rollback takes the order and its task with it
                raise HTTPException(409, f"not enough {order.item} in stock")
        return task_id

    async def order(self, order_id: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"SELECT order_id, item, quantity, task_id FROM {self._prefix}orders"
            " WHERE order_id = $1",
            order_id,
        )
        return None if row is None else dict(row)


def create_app(database: str, *, schema: str | None = None) -> FastAPI:
    """The service on ``database``: a SQLite file, or a PostgreSQL DSN (``schema`` for both
    the store's tables and the business tables; default: the store's own and ``public``)."""
    is_postgres = database.startswith(("postgresql://", "postgres://"))
    shop = PostgresShop(database, schema) if is_postgres else SqliteShop(database)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A client: it registers nothing and runs nothing, it only enqueues.
        async with Controller(store=shop.store, owner="orders-web") as client:
            await shop.open()
            try:
                app.state.client = client
                yield
            finally:
                await shop.close()

    app = FastAPI(title="orders", lifespan=lifespan)

    @app.post("/orders", status_code=201)
    async def place_order(order: Order, request: Request) -> dict[str, str]:
        task_id = await shop.place(request.app.state.client, order)
        return {"order_id": order.order_id, "task_id": task_id}

    @app.get("/orders/{order_id}")
    async def read_order(order_id: str, request: Request) -> dict[str, Any]:
        found = await shop.order(order_id)
        if found is None:
            raise HTTPException(404, f"no order {order_id}")
        try:
            task = await request.app.state.client.get(found["task_id"])
        except TaskNotFound:  # cannot happen: the order and its task committed together
            raise HTTPException(500, f"order {order_id} has no shipping task") from None
        return {**found, "shipping": task.status.value, "label": task.result}

    return app


app = create_app(os.environ.get("ORDERS_DATABASE", "orders.db"))
