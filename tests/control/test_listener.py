"""The PostgreSQL LISTEN session is killed, then 100 commands: all applied within poll + 1 s.

Notifications are only hints (P7): the poller polls every ``poll_interval``
whatever they do, and after the listener reconnects a full poll runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chongming import Controller, TaskStatus
from tests.stores.pg_support import admin_connection, drop_schema, fresh_name, require_postgres
from tests.support import wait_for

S = TaskStatus
POLL = 1.0


async def held(ctx: Any) -> None:
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.5)  # a stop is "stopping" at once; it ends at the next checkpoint


async def test_a_killed_listener_delays_no_command_past_the_poll_interval() -> None:
    dsn = require_postgres()
    from chongming.stores.postgres import PostgresTaskStore

    schema = fresh_name("lis")
    app = f"chongming-{schema}"
    holder_store = PostgresTaskStore(dsn, schema=schema, application_name=app)
    ops_store = PostgresTaskStore(dsn, schema=schema, application_name=f"{app}-ops")
    try:
        async with (
            holder_store,
            ops_store,
            Controller(
                store=holder_store, owner="holder", max_parallel=100, poll_interval=POLL
            ) as holder,
            Controller(store=ops_store, owner="ops") as ops,
        ):
            holder.register("held", held)
            runs = [await holder.submit("held", task_id=f"c{i}") for i in range(100)]
            await wait_for(lambda: all(run.status is S.RUNNING for run in runs), timeout=30)

            async with admin_connection() as admin:
                # Every session of the holder goes, its LISTEN session among them
                # (waiting to single that one out would cost a listener probe).
                rows = await admin.fetch(
                    "SELECT pid, query FROM pg_stat_activity WHERE application_name = $1", app
                )
                assert rows, "the holder has no sessions"
                for row in rows:
                    await admin.execute("SELECT pg_terminate_backend($1)", row["pid"])

            for run in runs:
                assert await ops.stop(run.task_id, reason="after the listener died")
            sent = asyncio.get_running_loop().time()
            await wait_for(lambda: all(run.status is not S.RUNNING for run in runs), timeout=30)
            applied = asyncio.get_running_loop().time() - sent
            assert applied <= POLL + 1.0, f"the last command was applied {applied:.2f}s later"
            outcomes = await holder.wait_all(30)
            assert {o.status for o in outcomes} == {S.STOPPED}
    finally:
        await drop_schema(schema)
