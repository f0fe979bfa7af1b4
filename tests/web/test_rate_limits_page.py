"""The dashboard's nodes page lists the fleet's rate limits as the store holds them."""

from __future__ import annotations

from pathlib import Path

from chongming import Controller
from chongming.stores.rates import RateLimit, parse_rate
from chongming.stores.sqlite import SqliteTaskStore
from chongming.web import create_app
from tests.web.test_app import client_for

EVIL = "<b>vendor</b>"


async def test_the_nodes_page_lists_rate_limits_escaped(tmp_path: Path) -> None:
    db = str(tmp_path / "tasks.db")
    store = SqliteTaskStore(db)
    await store.open()
    try:
        await store.declare_rate_limit("vendor-api", parse_rate("10/s burst 20"))
        await store.declare_rate_limit(EVIL, RateLimit(rate=600, per=parse_rate("1/min").per))
    finally:
        await store.close()
    async with Controller(store=db, owner="viewer"):
        app = create_app(db)
        async with await client_for(app) as client:
            page = (await client.get("/nodes")).text
        await app.aclose()
    assert "<h2>Rate limits</h2>" in page
    assert "10/s burst 20" in page
    assert "0.1 s" in page  # one start every tenth of a second, steadily
    assert "600/min" in page
    assert EVIL not in page
    assert "&lt;b&gt;vendor&lt;/b&gt;" in page


async def test_without_rate_limits_the_page_has_no_such_section(tmp_path: Path) -> None:
    db = str(tmp_path / "tasks.db")
    async with Controller(store=db, owner="viewer"):
        app = create_app(db)
        async with await client_for(app) as client:
            page = (await client.get("/nodes")).text
        await app.aclose()
    assert "Rate limits" not in page
