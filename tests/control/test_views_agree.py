"""Every view tells the truth the store holds: stats, ps, chongming stats and the dashboard agree.

A worker runs a mix (succeeded, failed, parked in a durable sleep, held back
by ``not_before``, unserved); a query client, the worker itself, the CLI's
views and the dashboard's API then count and explain the same tasks alike.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from chongming import Controller, TaskStatus
from chongming.cli import views
from chongming.controller.statistics import count_tasks
from chongming.plane.waiting import waiting_reasons
from chongming.state.query import TaskQuery
from chongming.web import create_app
from tests.conftest import FAST


async def ok(ctx: Any, n: int) -> int:
    return n


async def bad(ctx: Any) -> None:
    raise RuntimeError("no")


async def napper(ctx: Any) -> str:
    await ctx.sleep("nap", 3600)
    return "rested"


async def test_stats_ps_cli_and_dashboard_count_and_explain_alike(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    worker = Controller(store=db, owner="w-1", work=True, poll_interval=0.02, windows=FAST)
    worker.register("ok", ok)
    worker.register("bad", bad)
    worker.register("napper", napper, durable=True)
    async with worker, Controller(store=db, owner="client") as client:
        ended = [await client.enqueue("ok", n) for n in range(3)]
        ended += [await client.enqueue("bad") for _ in range(2)]
        nappers = [await client.enqueue("napper") for _ in range(2)]
        await client.enqueue("nobody")
        await client.enqueue("ok", 9, not_before=datetime.now(UTC) + timedelta(hours=1))
        for task in ended:
            await task.wait(timeout=20)
        for task in nappers:
            while (s := await client.get(task.task_id)).not_before is None or s.owner:
                await asyncio.sleep(0.02)
        store = client.store
        assert store is not None

        truth = dict(count_tasks(await store.task_counts()).by_status)
        listed = await client.list_tasks(TaskQuery())
        seen_by_client, seen_by_worker = await client.stats(), await worker.stats()
        cli = views.stats_json(await store.task_counts())
        reasons = await waiting_reasons(store, listed, now=await store.store_time())
        app = create_app(client)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as web:
            api = (await web.get("/api/tasks", params={"status": "all"})).json()

    assert truth == {"failed": 2, "queued": 4, "succeeded": 3}
    assert dict(Counter(s.status.value for s in listed)) == truth
    assert dict(seen_by_client.by_status) == dict(seen_by_worker.by_status) == truth
    assert seen_by_client.total == seen_by_worker.total == len(listed) == cli["total"]
    assert cli["by_status"] == truth
    assert api["counts"] == truth
    assert dict(Counter(t["status"] for t in api["tasks"])) == truth
    # Why each queued task waits: the same words in ps (the views) and the dashboard.
    by_id = {t["task_id"]: t["waiting"] for t in api["tasks"]}
    shown = {task_id: reason.describe() for task_id, reason in reasons.items()}
    assert shown == {k: v["reason"] for k, v in by_id.items() if v is not None}
    assert sorted(r.split(" ")[0] for r in shown.values()) == ["no", "not", "sleeping", "sleeping"]
    table = views.ps_text(listed, waiting=reasons)
    assert table.count("queued (") == 4
    assert table.splitlines()[-1] == "    active 4 (queued 4, holding a slot 0)"
    assert TaskStatus.QUEUED.value in truth
