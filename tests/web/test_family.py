"""A parent's page lists its children with their statuses; a child's page names its parent."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from chongming import Controller, TaskContext
from chongming.state.status import TaskStatus
from chongming.web.pages import badge
from tests.conftest import FAST
from tests.web.support import dashboard_client

#: A parent id a page must escape as text and quote in its link.
PARENT = "p-<b>1</b>/x"


async def leaf(ctx: TaskContext, n: int) -> int:
    return n


async def tree(ctx: TaskContext, count: int) -> Any:
    handles = [await ctx.spawn("leaf", n) for n in range(count)]
    return await ctx.gather(*handles)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Controller]:
    controller = Controller(
        store=str(tmp_path / "tasks.db"), owner="node-a", work=True, poll_interval=0.05,
        windows=FAST, park_threshold=0.0,
    )  # fmt: skip
    controller.register("leaf", leaf)
    controller.register("tree", tree, durable=True)
    async with controller:
        yield controller


@pytest.fixture
async def dash(node: Controller) -> AsyncIterator[httpx.AsyncClient]:
    async with dashboard_client(node) as client:
        yield client


async def test_a_parent_lists_its_children_and_a_child_names_its_parent(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    parent = await node.enqueue("tree", 3, task_id=PARENT)
    final = await parent.wait(timeout=30)
    assert final.status is TaskStatus.SUCCEEDED
    store = node.store
    assert store is not None
    children = await store.children_of(PARENT)
    assert len(children) == 3
    path = quote(PARENT, safe="")
    page = (await dash.get(f"/tasks/{path}")).text
    assert 'id="family"' in page
    assert "3 children" in page
    for child in children:
        assert f'href="./{child}"' in page  # relative: any base path, the live fragment too
    assert page.count(badge(TaskStatus.SUCCEEDED)) >= 3
    live = (await dash.get(f"/fragments/tasks/{path}")).text
    assert 'id="family"' in live
    child_page = (await dash.get(f"/tasks/{children[0]}")).text
    assert f'child of <a href="./{path}" class="text">{html.escape(PARENT)}</a>' in child_page
    assert PARENT not in child_page  # never raw
    api = (await dash.get(f"/api/tasks/{path}")).json()
    assert (api["parent"], sorted(api["children"])) == (None, sorted(children))
    assert (await dash.get(f"/api/tasks/{children[0]}")).json()["parent"] == PARENT


async def test_a_task_without_family_shows_no_section(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    await (await node.enqueue("leaf", 1, task_id="alone")).wait(timeout=30)
    assert 'id="family"' not in (await dash.get("/tasks/alone")).text
