"""The list's search (label part, idempotency key, time range) and why a queued task waits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from chongming import Controller
from chongming.web import create_app
from chongming.web.board import BadInput, ListFilter
from tests.conftest import FAST
from tests.web.support import register

EVIL = "<script>alert('x')</script>\u202egnp.exe"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A store with queued tasks nobody runs (this controller does not work)."""
    controller = Controller(
        store=str(tmp_path / "tasks.db"), owner="client", poll_interval=0.05, windows=FAST
    )
    register(controller)
    async with controller:
        await controller.enqueue("quick", task_id="evil-1", label=EVIL)
        await controller.enqueue("quick", task_id="plain-1", label="nightly 50% sync")
        await controller.enqueue("quick", task_id="keyed-1", idempotency_key="order-42")
        later = datetime.now(UTC) + timedelta(hours=3)
        await controller.enqueue("quick", task_id="later-1", not_before=later)
        await controller.enqueue("quick", task_id="pinned-1", version=7)
        app = create_app(controller)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield http
        await app.aclose()


async def _ids(client: httpx.AsyncClient, **params: str) -> list[str]:
    answer = await client.get("/api/tasks", params=params)
    assert answer.status_code == 200, answer.text
    return [task["task_id"] for task in answer.json()["tasks"]]


async def test_search_by_label_part_key_and_time_range(client: httpx.AsyncClient) -> None:
    assert await _ids(client, label="50%") == ["plain-1"]
    assert await _ids(client, label="<script>") == ["evil-1"]
    assert await _ids(client, key="order-42") == ["keyed-1"]
    assert await _ids(client, key="order-4") == []
    assert len(await _ids(client, **{"from": "2000-01-01T00:00"})) == 5
    assert await _ids(client, to="2000-01-01T00:00:00+00:00") == []
    soon = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    assert await _ids(client, **{"from": soon}) == []
    page = await client.get("/", params={"label": "<script>"})
    assert page.status_code == 200
    assert "evil-1" in page.text
    assert "plain-1" not in page.text
    assert "<script>alert" not in page.text  # the label, and the field echoing it, are text
    assert 'name="label" value="&lt;script&gt;"' in page.text
    # the pager and the live fragment keep the search
    assert "/fragments/tasks?label=%3Cscript%3E" in page.text


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"from": "yesterday"}, "from is not a date and time"),
        ({"to": "2026-13-40"}, "to is not a date and time"),
        ({"from": "2026-12-02T00:00", "to": "2026-12-01T00:00"}, "from must be before to"),
        ({"label": "x" * 1001}, "label must be at most 1000 characters"),
        ({"key": "a\x00b"}, "key must be at most 1000 characters without NUL"),
        ({"page": "zero"}, "bucket and page must be whole numbers"),
    ],
)
async def test_a_bad_search_is_a_400_naming_the_parameter(
    client: httpx.AsyncClient, params: dict[str, str], named: str
) -> None:
    page = await client.get("/", params=params)
    assert page.status_code == 400
    assert named in page.text
    api = await client.get("/api/tasks", params=params)
    assert api.status_code == 400
    assert named in api.json()["error"]
    hostile = await client.get("/", params={"from": "<script>alert(1)</script>"})
    assert hostile.status_code == 400
    assert "<script>alert(1)" not in hostile.text


async def test_the_list_says_why_a_queued_task_waits(client: httpx.AsyncClient) -> None:
    tasks = {
        task["task_id"]: task["waiting"]
        for task in (await client.get("/api/tasks")).json()["tasks"]
    }
    assert tasks["later-1"]["not_before"] is not None
    assert "not before" in tasks["later-1"]["reason"]
    assert tasks["pinned-1"]["unserved"] == "quick@7"  # no live worker serves that version
    page = await client.get("/")
    assert "no worker serves quick@7" in page.text
    assert "not before" in page.text


def test_the_filter_keeps_its_terms_in_its_parameters() -> None:
    wanted = ListFilter.parse({"label": " nightly ", "from": "2026-12-01T12:00", "page": "2"})
    assert wanted.search is not None
    assert wanted.search.label == "nightly"
    assert wanted.search.created_from == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert wanted.params(page=3) == {
        "label": "nightly",
        "from": "2026-12-01T12:00:00+00:00",
        "page": "3",
    }
    assert ListFilter.parse({}).search is None
    with pytest.raises(BadInput, match="to is not a date"):
        ListFilter.parse({"to": "soon"})
