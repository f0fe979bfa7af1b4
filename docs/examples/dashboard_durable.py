"""What the dashboard shows of durable work: a journal, the charts, a search.

Run it: ``python docs/examples/dashboard_durable.py``. A worker runs a
durable import that fetches, charges once through the effects ledger and
waits for an approval (it parks: the slot goes back while it waits); the
approval is sent, the import finishes, and the dashboard — driven in
process over HTTP, as a browser would — shows the journal, counts the end
on its charts and finds the task by its idempotency key. Needs
``pip install 'chongming[web]'``.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import httpx

from chongming import Controller, TaskContext
from chongming.web import create_app


async def fetch(url: str) -> dict[str, int]:
    return {"orders": 42}


async def charge(info: object, amount: int) -> dict[str, int]:
    return {"charged": amount}  # give info.idempotency_key to the payment provider


async def import_orders(ctx: TaskContext, url: str) -> dict[str, object]:
    fetched = await ctx.step("fetch", fetch, url)
    receipt = await ctx.effect("charge", charge, fetched["orders"])
    approval = await ctx.wait_for_fact("approved", timeout=300)  # parks on a worker
    return {"receipt": receipt, "approved_by": approval}


async def parked(client: Controller, task_id: str) -> None:
    """Until the task has given its slot back to wait for the fact."""
    for _ in range(600):
        history = await client.history(task_id)
        if any(t.trigger == "runtime:parked" for t in history):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the import never parked")


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "tasks.db"
        worker = Controller(store=db, owner="worker-1", work=True, poll_interval=0.05)
        worker.register("import-orders", import_orders, durable=True)
        async with worker, Controller(store=db, owner="web") as client:
            handle = await client.enqueue(
                "import-orders", "https://example.test/orders", idempotency_key="orders-12-01"
            )
            await parked(client, handle.task_id)
            await client.signal(handle.task_id, "approved", "ops", key="pager duty")
            final = await handle.wait(timeout=30)
            print(f"status {final.status.value}")

            app = create_app(client)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as web:
                page = (await web.get(f"/tasks/{handle.task_id}")).text
                kinds = re.findall(
                    r'<li class="[^"]*" data-kind="(run|step|effect|fact-[a-z]+)"', page
                )
                print("journal:", " ".join(kinds))
                print("parked while waiting:", "parked (a long sleep or fact wait" in page)
                charts = (await web.get("/charts")).text
                print("ends in the last hour:", re.search(r'id="ends">(\d+)<', charts).group(1))
                found = await web.get("/api/tasks", params={"key": "orders-12-01", "status": "all"})
                print("found by key:", [t["name"] for t in found.json()["tasks"]])
                bad = await web.get("/api/tasks", params={"from": "last tuesday"})
                print(f"bad from: {bad.status_code} {bad.json()['error'][:27]}")
            await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
