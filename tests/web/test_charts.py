"""The charts: the activity builder, the SVG (well-formed, escaped, bounded) and the page."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.etree import ElementTree

import httpx
import pytest

from chongming import Controller
from chongming.state.status import TaskStatus as S
from chongming.stores.activity import EndCount
from chongming.web import create_app
from chongming.web.activity import MINUTES, build_activity, percentile
from chongming.web.charts import MAX_BARS, hbar_chart, human_seconds, stacked_minutes
from chongming.web.charts_page import charts_body
from tests.conftest import FAST
from tests.web.support import register

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SVG = "{http://www.w3.org/2000/svg}"


def test_counts_fall_in_their_minute_and_durations_give_percentiles() -> None:
    counted = [
        EndCount(minute=59, status=S.SUCCEEDED, count=8),
        EndCount(minute=59, status=S.FAILED, count=1),
        EndCount(minute=0, status=S.FAILED, count=1),
        EndCount(minute=57, status=S.LOST, count=1),
        EndCount(minute=60, status=S.LOST, count=5),  # outside the window: ignored
    ]
    durations = [1.0] * 8 + [100.0, 10.0]
    view = build_activity(
        counted,
        durations,
        now=NOW,
        counts={"queued": 7},
        oldest_queued=NOW - timedelta(seconds=90),
    )
    assert len(view.per_minute) == MINUTES
    assert view.per_minute[-1] == {"succeeded": 8, "failed": 1}
    assert view.per_minute[0] == {"failed": 1}
    assert view.per_minute[-3] == {"lost": 1}
    assert view.ends == 11
    assert view.timed == 10
    assert view.durations[50] == 1.0
    assert view.durations[90] == 10.0
    assert view.durations[99] == 100.0
    assert view.queued == 7
    assert view.oldest_age == 90.0
    assert percentile([], 50) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_the_svg_is_well_formed_escaped_and_bounded() -> None:
    hostile = "<script>alert(1)</script>"
    minutes = [{"succeeded": i, hostile: 1} for i in range(MAX_BARS * 3)]
    svg = stacked_minutes(minutes, label=hostile)
    tree = ElementTree.fromstring(svg)
    assert tree.tag == f"{SVG}svg"
    bars = tree.findall(f".//{SVG}rect[@class='bar']")
    assert len(bars) <= 2 * MAX_BARS  # at most MAX_BARS minutes, two segments each
    assert "<script>" not in svg
    assert "&lt;script&gt;" in svg
    heights = [float(bar.get("height", "0")) for bar in bars]
    assert max(heights) <= 240
    rows = [(hostile, 3.0, "#000"), ("b", 1.5, "#111")]
    bars_svg = hbar_chart(rows, label="x", seconds=True)
    assert "<script>" not in bars_svg
    ElementTree.fromstring(bars_svg)
    assert "3 s" in bars_svg
    assert "1.5 s" in bars_svg
    assert human_seconds(185) == "3 min 5 s"
    assert human_seconds(7300) == "2 h 1 min"


def test_an_empty_hour_says_so() -> None:
    view = build_activity([], [], now=NOW, counts={}, oldest_queued=None)
    body = charts_body(view)
    assert "nothing ended in this hour" in body
    assert "no claimable task waits" in body
    ElementTree.fromstring(f"<div>{body}</div>")


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Controller]:
    controller = Controller(
        store=str(tmp_path / "tasks.db"), owner="node-a", poll_interval=0.05, windows=FAST
    )
    register(controller)
    async with controller:
        yield controller


async def test_the_charts_page_counts_what_ended(node: Controller) -> None:
    for i in range(5):
        await node.submit("quick", task_id=f"q-{i}")
    await node.submit("broken", task_id="b-0")
    await node.wait_all(timeout=10)
    await node.enqueue("quick", task_id="waiting-1")  # nobody claims: this node does not work
    app = create_app(node)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        page = await client.get("/charts")
        fragment = await client.get("/fragments/charts")
    await app.aclose()
    assert page.status_code == 200
    assert 'id="ends">6<' in page.text
    assert 'id="depth">1<' in page.text
    assert "oldest claimable task queued" in page.text
    assert 'data-status="succeeded"' in page.text
    assert 'data-status="failed"' in page.text
    assert "<script>" not in fragment.text
    assert 'id="ends">6<' in fragment.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
