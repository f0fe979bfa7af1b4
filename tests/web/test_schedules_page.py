"""The dashboard's nodes page lists the store's schedules with their cadence in words."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from chongming import Controller
from chongming.web import create_app
from tests.web.test_app import client_for

EVIL = "<script>alert('x')</script>"


def _ping(ctx: object) -> str:
    return "pong"


async def test_the_nodes_page_lists_schedules_escaped(tmp_path: Path) -> None:
    db = str(tmp_path / "tasks.db")
    async with Controller(store=db, owner="planner") as controller:
        controller.register("ping", _ping)
        await controller.schedule("ping", every=timedelta(minutes=5), key=EVIL)
        await controller.schedule("ping", cron="30 2 * * *", timezone="Europe/Berlin")
        await controller.pause_schedule("ping")
        app = create_app(db)
        async with await client_for(app) as client:
            page = (await client.get("/nodes")).text
        await app.aclose()
    assert "<h2>Schedules</h2>" in page
    assert "every 5 minutes" in page
    assert "at 02:30 every day (Europe/Berlin)" in page
    assert "paused" in page
    assert EVIL not in page
    assert "&lt;script&gt;" in page
