"""A stored pipeline on the dashboard: its nodes as a graph, as JSON, and bad ids refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from chongming import Controller, Pipeline, TaskContext
from chongming.state.status import TaskStatus
from chongming.web.pages import badge
from tests.conftest import FAST
from tests.web.support import dashboard_client

#: A run id a page must escape as text and quote in its links.
RUN = "etl-<b>1</b>"


async def fetch(ctx: TaskContext) -> int:
    return 1


async def shard(ctx: TaskContext, n: int, *, fail: bool = False) -> int:
    if fail:
        raise ValueError(f"shard {n} is <corrupt>")
    return n


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Controller]:
    controller = Controller(
        store=str(tmp_path / "tasks.db"), owner="node-a", work=True, poll_interval=0.05,
        windows=FAST, park_threshold=0.0,
    )  # fmt: skip
    controller.register("fetch", fetch)
    controller.register("shard", shard)
    async with controller:
        yield controller


@pytest.fixture
async def dash(node: Controller) -> AsyncIterator[httpx.AsyncClient]:
    async with dashboard_client(node) as client:
        yield client


def _pipeline() -> Pipeline:
    pipeline = Pipeline("nightly")
    root = pipeline.node("fetch", node_id="fetch")
    pipeline.node("shard", 0, node_id="s0", depends_on=[root])
    pipeline.node("shard", 1, node_id="s1", depends_on=[root], fail=True)
    return pipeline


async def test_a_run_is_shown_as_its_nodes_with_their_statuses(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    queued = await node.enqueue_pipeline(_pipeline(), run_id=RUN)
    assert (await queued.wait(timeout=30)).status is TaskStatus.FAILED
    page = await dash.get(f"/pipelines/{quote(RUN, safe='')}")
    assert page.status_code == 200
    assert "<b>1</b>" not in page.text  # the id is text, not markup
    assert "etl-&lt;b&gt;1&lt;/b&gt;" in page.text
    assert f'href="/tasks/{quote(RUN + ":s1", safe="")}"' in page.text
    assert badge(TaskStatus.FAILED) in page.text
    assert "shard 1 is &lt;corrupt&gt;" in page.text
    data = (await dash.get(f"/api/pipelines/{quote(RUN, safe='')}")).json()["pipeline"]
    assert [(n["id"], n["status"]) for n in data["nodes"]] == [
        ("fetch", "succeeded"), ("s0", "succeeded"), ("s1", "failed"),
    ]  # fmt: skip
    task_page = await dash.get(f"/tasks/{quote(RUN, safe='')}")
    assert f'href="../pipelines/{quote(RUN, safe="")}"' in task_page.text


async def test_an_unknown_run_or_a_plain_task_is_refused(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    node.register("plain", fetch)
    await (await node.enqueue("plain", task_id="plain")).wait(timeout=30)
    missing = await dash.get("/api/pipelines/ghost")
    assert missing.status_code == 404
    plain = await dash.get("/api/pipelines/plain")
    assert plain.status_code == 400
    assert "not a stored pipeline" in plain.json()["error"]
    assert (await dash.get("/pipelines/plain")).status_code == 400
