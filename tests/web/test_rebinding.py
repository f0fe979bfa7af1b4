"""DNS rebinding and cross-site posts: the Host allow-list and the Origin check; the header's store.

A page of another site whose name was made to resolve to 127.0.0.1 reaches a
loopback dashboard with its own name in ``Host`` and its own ``Origin``: it
must neither read a page (the CSRF token is on it) nor get a post obeyed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from chongming import Controller
from chongming.cli.app import app as cli
from chongming.state.status import TaskStatus
from chongming.web import create_app
from chongming.web.app import Dashboard, describe_store
from chongming.web.security import host_allowed, origin_matches
from tests.conftest import FAST
from tests.web.support import csrf_of, register

TOKEN = "a-very-long-dashboard-token-0123"


def test_the_host_allow_list_and_the_origin_check() -> None:
    loopback_only: frozenset[str] = frozenset()
    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:8000", "127.3.4.5"):
        assert host_allowed(host, loopback_only), host
    refused: tuple[str | None, ...] = ("evil.example", "evil.example:8000", "", None, "a/b")
    for bad in (*refused, "127.0.0.1.evil.example"):
        assert not host_allowed(bad, loopback_only), bad
    assert host_allowed("Dash.Internal:8443", frozenset({"dash.internal"}))
    assert host_allowed("anything", frozenset({"*"}))
    assert host_allowed("anything", None)  # a token without a list

    assert origin_matches("127.0.0.1:8000", "http://127.0.0.1:8000", None)
    assert origin_matches("dash", "http://dash", None)
    assert origin_matches("dash:80", "http://dash", None)  # the default port, written or not
    assert origin_matches("127.0.0.1:8000", None, "http://127.0.0.1:8000/tasks/x")
    for origin, referer in (
        ("http://evil.example", None),
        ("http://127.0.0.1:9999", None),
        ("null", "http://127.0.0.1:8000/"),  # Origin wins over Referer
        (None, "http://evil.example/page"),
        (None, None),
        ("file://", None),
    ):
        assert not origin_matches("127.0.0.1:8000", origin, referer), (origin, referer)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Controller]:
    controller = Controller(store=tmp_path / "tasks.db", owner="node-a", windows=FAST)
    register(controller)
    async with controller:
        yield controller


def _location(node: Controller) -> str:
    path = getattr(node.store, "path", None)
    assert isinstance(path, str)
    return path


def _client(app: Dashboard, host: str = "127.0.0.1", **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=f"http://{host}", headers=headers
    )


async def _running(node: Controller, task_id: str) -> None:
    run = await node.submit("endless", task_id=task_id)
    while run.status is not TaskStatus.RUNNING:
        await asyncio.sleep(0.01)


async def test_a_foreign_host_reads_nothing_and_a_foreign_origin_changes_nothing(
    node: Controller,
) -> None:
    await _running(node, "loop-1")
    app = create_app(_location(node))  # its own controller: a stop travels as a command
    async with _client(app, "evil.example") as rebound:
        for path in ("/", "/tasks/loop-1", "/api/tasks", "/metrics", "/login"):
            page = await rebound.get(path)
            assert page.status_code == 421, path
            assert 'name="csrf"' not in page.text
        posted = await rebound.post("/control", data={"kind": "stop", "task_id": "loop-1"})
        assert posted.status_code == 421
    async with _client(app) as local:
        csrf = csrf_of((await local.get("/tasks/loop-1")).text)
        form = {"kind": "stop", "task_id": "loop-1", "csrf": csrf}
        for headers in (
            {"origin": "http://evil.example"},
            {"origin": "null"},
            {"referer": "http://evil.example/attack.html"},
            {},  # neither: not from the dashboard's own pages
        ):
            refused = await local.post("/control", data=form, headers=headers)
            assert refused.status_code == 403, headers
            assert "Origin" in refused.text
        reconcile = await local.post("/reconcile", data={"csrf": csrf})
        assert reconcile.status_code == 403
        store = node.store
        assert store is not None
        assert await store.command_records(task_id="loop-1") == []  # nothing was sent
        assert (await node.get("loop-1")).status is TaskStatus.RUNNING
        sent = await local.post("/control", data=form, headers={"origin": "http://127.0.0.1"})
        assert sent.status_code == 303
        assert [r.command.kind.value for r in await store.command_records(task_id="loop-1")] == [
            "stop"
        ]
    await app.aclose()
    await node.stop("loop-1")


async def test_allowed_hosts_and_a_token_widen_the_list_and_scripts_post_with_bearer(
    node: Controller,
) -> None:
    await _running(node, "loop-2")
    named = create_app(node, allowed_hosts=["dash.internal"])
    async with _client(named, "dash.internal:8000") as client:
        assert (await client.get("/")).status_code == 200
    async with _client(named, "other.internal") as client:
        assert (await client.get("/")).status_code == 421
    with pytest.raises(ValueError, match="collection of host names"):
        create_app(node, allowed_hosts="dash.internal")  # a str is a Collection[str]: refused

    tokened = create_app(node, token=TOKEN)
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with _client(tokened, "dash.example.com", **bearer) as script:
        page = await script.get("/tasks/loop-2")
        assert page.status_code == 200  # a token, no list: any host (the token protects it)
        form = {"kind": "stop", "task_id": "loop-2", "csrf": csrf_of(page.text)}
        sent = await script.post("/control", data=form)  # no Origin: a script with its token
        assert sent.status_code == 303
        foreign = await script.post("/control", data=form, headers={"origin": "http://evil"})
        assert foreign.status_code == 403
    async with _client(tokened, "127.0.0.1") as browser:
        login = await browser.post("/login", data={"token": TOKEN})
        assert login.status_code == 403  # a login post from no page of ours
        login = await browser.post(
            "/login", data={"token": TOKEN}, headers={"origin": "http://127.0.0.1"}
        )
        assert login.status_code == 303


def test_the_command_refuses_a_bad_allowed_host(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    db.touch()
    result = CliRunner().invoke(cli, ["--db", str(db), "dashboard", "--allowed-host", "a/b"])
    assert result.exit_code == 1
    assert "allowed host 'a/b' is not a host name" in result.output


async def test_the_header_shows_the_redacted_location_never_a_repr(tmp_path: Path) -> None:
    from chongming.stores.postgres import PostgresTaskStore

    dsn = "postgresql://user:s3cret-pw@127.0.0.1:1/x"
    store = PostgresTaskStore(dsn)
    assert describe_store(store) == "postgresql://user:***@127.0.0.1:1/x"
    other = PostgresTaskStore(dsn, schema="tenant_a")
    assert describe_store(other) == "postgresql://user:***@127.0.0.1:1/x schema=tenant_a"
    app = create_app(store)
    async with _client(app) as client:
        response = await client.get("/")
    await app.aclose()
    await store.close()
    await other.close()
    assert "s3cret-pw" not in response.text
    assert "PostgresTaskStore(" not in response.text
    assert "postgresql://user:***@127.0.0.1:1/x" in response.text
