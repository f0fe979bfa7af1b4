"""The dashboard app in process (httpx over ASGI): pages, filters, escaping, controls, security."""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from chongming import Controller
from chongming.state.status import TaskStatus
from chongming.web import create_app
from chongming.web.app import Dashboard
from tests.conftest import FAST
from tests.web.support import csrf_of, register

TOKEN = "a-very-long-dashboard-token-0123"
EVIL = "<script>alert('x')</script>\u202egnp.exe"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "tasks.db")


@pytest.fixture
async def node(db: str) -> AsyncIterator[Controller]:
    """A node that runs tasks, in buckets 0-31 of the shared store."""
    controller = Controller(
        store=db, owner="node-a", poll_interval=0.05, windows=FAST, owned_buckets=range(32)
    )
    register(controller)
    async with controller:
        yield controller


async def client_for(app: Dashboard) -> httpx.AsyncClient:
    # A browser's form posts carry the page's Origin; so do this client's requests.
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1",
        headers={"origin": "http://127.0.0.1"},
    )


@pytest.fixture
async def dash(db: str, node: Controller) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(db)
    async with await client_for(app) as client:
        yield client
    await app.aclose()


async def test_the_list_filters_and_pages_through_the_store(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    for i in range(7):
        await node.submit("quick", task_id=f"q-{i}", label=f"quick {i}", tags={"etl"})
    await node.submit("broken", task_id="b-0", label="broken one")
    await node.wait_all(timeout=10)
    looping = await node.submit("endless", task_id="e-0", label="looping", bucket_key="j")
    page = await dash.get("/")  # default: unfinished tasks only
    assert page.status_code == 200
    assert "e-0" in page.text
    assert "q-0" not in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    every = (await dash.get("/api/tasks", params={"status": "all"})).json()
    assert [t["task_id"] for t in every["tasks"]][:2] == ["q-0", "q-1"]
    assert every["counts"] == {"succeeded": 7, "failed": 1, "running": 1}
    failed = (await dash.get("/api/tasks", params={"status": "failed"})).json()["tasks"]
    assert [t["task_id"] for t in failed] == ["b-0"]
    by_name = (await dash.get("/api/tasks", params={"status": "all", "name": "quick"})).json()
    assert len(by_name["tasks"]) == 7
    by_tag = (await dash.get("/api/tasks", params={"status": "all", "tag": "etl"})).json()
    assert len(by_tag["tasks"]) == 7
    by_owner = (await dash.get("/api/tasks", params={"status": "all", "owner": "nobody"})).json()
    assert by_owner["tasks"] == []
    bucket = node.buckets.bucket_for("j")
    in_bucket = (await dash.get("/api/tasks", params={"status": "all", "bucket": bucket})).json()
    assert [t["task_id"] for t in in_bucket["tasks"]] == ["e-0"]
    refused = await dash.get("/", params={"status": "nonsense"})
    assert refused.status_code == 400
    assert (await dash.get("/", params={"page": "0"})).status_code == 400
    await looping.stop(reason="test over")
    await looping.wait(timeout=5)


async def test_pages_split_the_list_and_link_to_the_next(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    for i in range(55):
        await node.submit("quick", task_id=f"t-{i:03d}")
    await node.wait_all(timeout=20)
    first = await dash.get("/", params={"status": "all"})
    assert "t-000" in first.text
    assert "t-049" in first.text
    assert "t-050" not in first.text
    assert "next →" in first.text
    second = await dash.get("/", params={"status": "all", "page": "2"})
    assert "t-050" in second.text
    assert "t-054" in second.text
    assert "t-049" not in second.text
    assert "next →" not in second.text
    assert "← previous" in second.text
    fragment = await dash.get("/fragments/tasks", params={"status": "all", "page": "2"})
    assert fragment.text.startswith('<div class="counts">')
    assert "<html" not in fragment.text


async def test_every_user_string_is_escaped(node: Controller, dash: httpx.AsyncClient) -> None:
    await node.submit("broken", task_id="evil-1", label=EVIL)
    await node.wait_all(timeout=10)
    for url in ("/?status=all", "/tasks/evil-1", "/fragments/tasks/evil-1"):
        text = (await dash.get(url)).text
        assert "<script>alert" not in text
        assert "\u202e" not in text  # the override is shown as \u202e, never applied
        assert html.escape("<script>alert('x')</script>\\u202egnp.exe") in text
    page = (await dash.get("/tasks/evil-1")).text
    assert "the upstream &lt;b&gt;API&lt;/b&gt; returned 503" in page  # the failure message
    assert page.count("<script") == 1  # only the dashboard's own, from /static
    missing = await dash.get("/tasks/%3Cscript%3E")
    assert missing.status_code == 404
    assert "<script>" not in missing.text


async def test_a_task_page_shows_the_trajectory_and_the_diagram(
    node: Controller, dash: httpx.AsyncClient
) -> None:
    run = await node.submit("endless", task_id="loop-1", label="loop")
    while run.status is not TaskStatus.RUNNING:
        await asyncio.sleep(0.01)
    assert await node.pause("loop-1", reason="maintenance")
    assert await node.resume("loop-1")
    await node.stop("loop-1", reason="release window")
    await run.wait(timeout=5)
    await node.close()  # everything durable in the store
    page = (await dash.get("/tasks/loop-1")).text
    for expected in (
        "running → pausing",
        "user:pause",
        "maintenance",
        "runtime:pause_reached",
        "paused → running",
        "user:resume",
        "running → stopping",
        "release window",
        "runtime:stop_confirmed",
    ):
        assert expected in page, expected
    assert page.index("user:pause") < page.index("user:resume") < page.index("user:stop")
    assert 'class="state terminal visited current" data-state="stopped"' in page
    assert 'class="edge taken"' in page
    assert 'id="controls" hidden' in page  # a finished task offers no controls


async def test_the_stop_button_path_reaches_the_owner_as_a_command(
    db: str, node: Controller, dash: httpx.AsyncClient
) -> None:
    run = await node.submit("endless", task_id="loop-2")
    while run.status is not TaskStatus.RUNNING:
        await asyncio.sleep(0.01)
    page = (await dash.get("/tasks/loop-2")).text
    refused = await dash.post(
        "/control", data={"kind": "stop", "task_id": "loop-2", "reason": "no csrf"}
    )
    assert refused.status_code == 403
    wrong = await dash.post(
        "/control", data={"kind": "stop", "task_id": "loop-2", "csrf": "0" * 64}
    )
    assert wrong.status_code == 403
    sent = await dash.post(
        "/control",
        data={
            "kind": "stop",
            "task_id": "loop-2",
            "reason": "from the board",
            "csrf": csrf_of(page),
        },
    )
    assert sent.status_code == 303
    assert sent.headers["location"] == "/tasks/loop-2?sent=stop&issued=1"
    outcome = await run.wait(timeout=5)
    assert outcome.status is TaskStatus.STOPPED
    stop = [t for t in run.transitions if t.trigger == "user:stop"]
    assert [(t.actor, t.reason) for t in stop] == [("dashboard", "from the board")]
    store = node.store
    assert store is not None
    records = await store.command_records(task_id="loop-2")
    assert [r.command.kind.value for r in records] == ["stop"]  # the refused ones sent nothing
    notice = (await dash.get(sent.headers["location"])).text
    assert "stop requested (addressed to node-a)" in notice


async def test_read_only_shows_and_accepts_no_control(db: str, node: Controller) -> None:
    run = await node.submit("endless", task_id="loop-3")
    while run.status is not TaskStatus.RUNNING:
        await asyncio.sleep(0.01)
    app = create_app(db, read_only=True)
    async with await client_for(app) as client:
        page = (await client.get("/tasks/loop-3")).text
        assert "<form" not in page
        assert "<button" not in page
        assert "Reconcile" not in page
        for path, form in (
            ("/control", {"kind": "stop", "task_id": "loop-3", "csrf": app._guard.csrf}),
            ("/reconcile", {"csrf": app._guard.csrf}),
        ):
            assert (await client.post(path, data=form)).status_code == 403
    await app.aclose()
    await asyncio.sleep(0.2)  # several command polls of the node
    assert run.status is TaskStatus.RUNNING
    await run.stop()
    await run.wait(timeout=5)


async def test_a_token_guards_every_page_and_control(db: str, node: Controller) -> None:
    run = await node.submit("endless", task_id="loop-4")
    app = create_app(db, token=TOKEN)
    async with await client_for(app) as client:
        assert (await client.get("/api/tasks")).status_code == 401
        assert (await client.get("/metrics")).status_code == 401
        login = await client.get("/", headers={"accept": "text/html"})
        assert login.status_code == 303
        assert login.headers["location"] == "/login"
        poll = await client.get("/fragments/tasks", headers={"accept": "text/html"})
        assert poll.status_code == 401  # the live poll is told, not sent to a login page
        csrf = app._guard.csrf
        blind = await client.post(
            "/control", data={"kind": "stop", "task_id": "loop-4", "csrf": csrf}
        )
        assert blind.status_code == 403
        bad = await client.post("/login", data={"token": "wrong-token-wrong-token"})
        assert bad.status_code == 403
        assert "chongming_dashboard" not in bad.headers.get("set-cookie", "")
        good = await client.post("/login", data={"token": TOKEN})
        assert good.status_code == 303
        cookie = good.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert TOKEN not in cookie
        assert (await client.get("/api/tasks")).status_code == 200  # the cookie now
    async with await client_for(app) as script:  # no cookie: the bearer token
        bearer = await script.get("/api/tasks", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200
        wrong = await script.get("/api/tasks", headers={"authorization": "Bearer x" * 4})
        assert wrong.status_code == 401
    await app.aclose()
    assert run.status is not TaskStatus.STOPPED
    await run.stop()
    await run.wait(timeout=5)


async def test_nodes_page_warns_of_buckets_owned_twice_and_orphaned(
    db: str, node: Controller
) -> None:
    await node.submit("quick", task_id="mine")  # node-a registers (buckets 0-31)
    other = Controller(store=db, owner="node-b", owned_buckets=range(16, 64))
    register(other)
    async with other:
        await other.submit("quick", task_id="theirs")
        # Enqueued by a client into a bucket nobody... every bucket is owned now;
        # enqueue a name no worker serves: it waits, and the page says so.
        await other.enqueue("nobody-serves-this", task_id="waiting")
        app = create_app(db)
        async with await client_for(app) as client:
            page = (await client.get("/nodes")).text
        await app.aclose()
    assert page.count('data-warning="owned-twice"') == 16  # buckets 16-31
    assert 'data-warning="unserved"' in page
    assert "nobody-serves-this" in page
    assert "node-a" in page
    assert "node-b" in page


async def test_reconcile_is_a_dry_run_first_then_an_apply(tmp_path: Path, db: str) -> None:
    dead = Controller(store=db, owner="gone", lease_ttl=0.2, windows=FAST)
    register(dead)
    await dead.start()
    run = await dead.submit("endless", task_id="orphan")
    while run.status is not TaskStatus.RUNNING:
        await asyncio.sleep(0.01)
    plane = dead._plane
    assert plane is not None
    await plane.writer.aclose(1.0)  # the node "dies": it writes and renews nothing more
    await plane.node.aclose()
    app = create_app(db, owner="board")
    async with await client_for(app) as client:
        dry = (await client.get("/reconcile")).text
        assert "Reconcile — dry run" in dry
        assert "→ lost" in dry
        assert "orphan" in dry
        assert (await client.get("/api/tasks/orphan")).json()["task"]["status"] == "running"
        applied = await client.post(
            "/reconcile", data={"csrf": csrf_of(dry), "reason": "node gone"}
        )
        assert applied.status_code == 200
        assert "Reconcile — applied" in applied.text
        task = (await client.get("/api/tasks/orphan")).json()
        assert task["task"]["status"] == "lost"
        assert task["transitions"][-1]["trigger"] == "reconcile:lease_expired"
        assert task["transitions"][-1]["reason"] == "node gone"
    await app.aclose()
    await run.stop()
    await dead.close()


async def test_no_dsn_password_is_shown(tmp_path: Path) -> None:
    app = create_app("postgresql://user:s3cret-pw@127.0.0.1:1/x")
    async with await client_for(app) as client:
        response = await client.get("/")
    await app.aclose()
    assert response.status_code == 503
    assert "s3cret-pw" not in response.text
    assert "user:***@127.0.0.1" in response.text


async def test_the_reconcile_dry_run_shows_resumed_and_waiting_tasks(
    tmp_path: Path, db: str
) -> None:
    """Issue 22, case 13: a dry run with a resumable durable task raised KeyError; the work
    queue's unowned tasks were listed "adoptable … it never started"."""
    from tests.control.test_durable import _plant_dead_attempt

    await _plant_dead_attempt(Path(db), "durable-1")  # a dead worker's durable attempt
    async with Controller(store=db, owner="client") as client:
        await client.enqueue("nobody-serves-this", task_id="in-the-queue")
    app = create_app(db, owner="board")
    async with await client_for(app) as client:
        response = await client.get("/reconcile")
    await app.aclose()
    assert response.status_code == 200
    dry = response.text
    assert "→ back to the queue (resumed)" in dry
    assert "unchanged (in the queue)" in dry
    assert "in the work queue, claimable now" in dry
    assert "never started" not in dry
