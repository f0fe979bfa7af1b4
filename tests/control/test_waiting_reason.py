"""Why a queued task waits — parked in a sleep, in a fact wait, held back, unserved — in every view.

``ps``, ``status`` and the dashboard (page and JSON) show the same reason,
from one function (:func:`chongming.plane.waiting.waiting_reason`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from chongming import Controller, TaskStatus
from chongming.plane.waiting import WaitingReason, waiting_reason
from chongming.state.records import TaskSnapshot
from chongming.stores.durable import StepRecord
from chongming.stores.nodes import NodeInfo
from chongming.stores.sqlite import SqliteTaskStore
from chongming.web import create_app
from tests.cli.support import invoke
from tests.conftest import FAST

NOW = datetime(2026, 10, 2, 14, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)


def _queued(**fields: Any) -> TaskSnapshot:
    base = TaskSnapshot(
        task_id="t-1",
        name="job",
        label="job",
        status=TaskStatus.QUEUED,
        status_version=1,
        attempt=0,
        max_attempts=1,
        created_at=NOW,
        updated_at=NOW,
    )
    return dataclasses.replace(base, **fields)


def _step(name: str, seq: int, value: Any = None) -> StepRecord:
    return StepRecord(name=name, occurrence=0, ok=True, value=value, seq=seq)


def test_the_reason_comes_from_the_journal_not_before_and_what_is_served() -> None:
    parked = _queued(not_before=LATER)
    deadline = (LATER + timedelta(hours=1)).timestamp()
    cases = [
        (parked, [_step("fetch", 1), _step("sleep:nap", 2, LATER.timestamp())], "sleeping until"),
        (parked, [_step("fact:paid:deadline", 1, None)], "waiting for fact 'paid', no deadline"),
        (parked, [_step("fact:a:b:deadline", 1, deadline)], "waiting for fact 'a:b' until 2026"),
        (parked, [_step("fact:x:deadline", 1, 1e18)], "waiting for fact 'x' until 9999-12-31"),
        # The sleep ended (a later step was recorded): only not_before holds it back.
        (parked, [_step("sleep:nap", 1, 0.0), _step("after", 2)], "not before 2026-10-02T15:00"),
        (parked, [_step("fact:paid:deadline", 1), _step("fact:paid", 2)], "not before"),
        (_queued(version=7), [], "no worker serves job@7"),
    ]
    for snapshot, steps, expected in cases:
        reason = waiting_reason(snapshot, now=NOW, steps=steps, served=frozenset({"job"}))
        assert reason is not None, (steps, expected)
        assert reason.describe().startswith(expected), (reason.describe(), expected)
    # Next in line, claimed, not queued, a not_before already past: no reason.
    for ready in (
        _queued(),
        _queued(not_before=NOW - timedelta(seconds=1)),
        _queued(not_before=LATER, owner="w-1"),
        _queued(status=TaskStatus.RUNNING, not_before=LATER),
    ):
        assert waiting_reason(ready, now=NOW, served=frozenset({"job"})) is None
    both = WaitingReason(sleeping_until=LATER, unserved="job@2").describe()
    assert both == "sleeping until 2026-10-02T15:00:00Z; no worker serves job@2"


async def sleeper(ctx: Any) -> str:
    await ctx.sleep("nap", 3600)
    return "rested"


async def waiter(ctx: Any, timeout: float | None = None) -> Any:
    return await ctx.wait_for_fact("paid", timeout=timeout, poll_interval=0.02)


def _parked(snapshot: TaskSnapshot) -> bool:
    return snapshot.status is TaskStatus.QUEUED and snapshot.not_before is not None


async def _fill(db: Path) -> None:
    worker = Controller(store=db, owner="w-1", work=True, poll_interval=0.05, windows=FAST)
    worker.register("sleeper", sleeper, durable=True)
    worker.register("waiter", waiter, durable=True)
    async with Controller(store=db, owner="client") as client:
        async with worker:
            await client.enqueue("sleeper", task_id="s-1")
            await client.enqueue("waiter", task_id="f-1")
            await client.enqueue("waiter", 3600, task_id="f-2")
            ids = ["s-1", "f-1", "f-2"]
            while not all([_parked(await client.get(i)) for i in ids]):
                await asyncio.sleep(0.02)
        later = datetime.now(UTC) + timedelta(hours=1)
        await client.enqueue("sleeper", task_id="n-1", not_before=later)
        await client.enqueue("sleeper", task_id="v-1", version=7)
        await client.enqueue("nobody", task_id="u-1")
    # A live node that serves the registered names (unversioned), as a worker would.
    async with SqliteTaskStore(db) as store:
        info = NodeInfo(
            owner="w-2",
            incarnation="w-2-1",
            host="h",
            pid=1,
            version="t",
            num_buckets=64,
            serves=frozenset({"sleeper", "waiter"}),
        )
        await store.register_node(info, ttl_seconds=600)


EXPECTED = {
    "s-1": "sleeping until 20",
    "f-1": "waiting for fact 'paid', no deadline",
    "f-2": "waiting for fact 'paid' until 20",
    "n-1": "not before 20",
    "v-1": "no worker serves sleeper@7",
    "u-1": "no worker serves nobody",
}


def _reason_of(text: str, task_id: str) -> str:
    (row,) = [line for line in text.splitlines() if line.startswith(f"{task_id} ")]
    return row.split("queued (", 1)[1]


def test_ps_status_and_the_dashboard_say_why_each_task_waits(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    asyncio.run(_fill(db))

    table = invoke(db, "ps").stdout
    for task_id, expected in EXPECTED.items():
        assert _reason_of(table, task_id).startswith(expected), (task_id, table)
    listed = json.loads(invoke(db, "ps", "--json").stdout)["tasks"]
    reasons = {task["task_id"]: task["waiting"]["reason"] for task in listed}
    assert {k: v.startswith(EXPECTED[k]) for k, v in reasons.items()} == dict.fromkeys(
        EXPECTED, True
    )
    sleeping = next(task["waiting"] for task in listed if task["task_id"] == "s-1")
    assert sleeping["sleeping_until"].endswith("Z")
    assert sleeping["fact"] is None

    status = invoke(db, "status", "f-1").stdout
    assert "waiting:  waiting for fact 'paid', no deadline" in status
    one = json.loads(invoke(db, "status", "f-1", "--json").stdout)["task"]
    assert one["waiting"]["fact"] == "paid"

    async def dashboard() -> tuple[str, dict[str, Any], str, dict[str, Any]]:
        app = create_app(str(db))
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as web:
                page = (await web.get("/")).text
                api = (await web.get("/api/tasks")).json()
                task = (await web.get("/tasks/f-2")).text
                one = (await web.get("/api/tasks/f-2")).json()
        finally:
            await app.aclose()
        return page, api, task, one

    page, api, task_page, task_api = asyncio.run(dashboard())
    for expected in EXPECTED.values():
        assert expected.replace("'", "&#x27;") in page, expected
    assert {t["task_id"]: t["waiting"]["reason"] for t in api["tasks"]} == reasons
    assert "waiting for fact &#x27;paid&#x27; until 20" in task_page
    assert task_api["task"]["waiting"]["reason"] == reasons["f-2"]
