"""Prometheus metrics, scraped and parsed with prometheus_client's own parser."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from chongming import Controller
from chongming.controller.observers import Observer
from chongming.state.status import TaskStatus
from chongming.web import create_app
from chongming.web.metrics import ChongmingMetrics
from tests.conftest import FAST
from tests.web.support import register


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float], metric: str, **labels: str
) -> float:
    return found.get((metric, tuple(sorted(labels.items()))), 0.0)


async def test_a_worker_controller_counts_what_it_does(tmp_path: Path) -> None:
    metrics = ChongmingMetrics()
    db = str(tmp_path / "tasks.db")
    node = Controller(
        store=db, owner="node-m", observers=[metrics], windows=FAST, poll_interval=0.05
    )
    register(node)
    async with node:
        for i in range(5):
            await node.submit("quick", task_id=f"q-{i}")
        await node.submit("broken", task_id="b-0")
        await node.wait_all(timeout=10)
        looping = await node.submit("endless", task_id="e-0", tags={"etl"})
        while looping.status is not TaskStatus.RUNNING:
            await asyncio.sleep(0.01)
        app = create_app(db, metrics=metrics)  # the dashboard's /metrics shows these counters
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://127.0.0.1",
            headers={"origin": "http://127.0.0.1"},
        ) as client:
            page = (await client.get("/tasks/e-0")).text
            csrf = page.split('name="csrf" value="')[1].split('"')[0]
            await client.post("/control", data={"kind": "stop", "task_id": "e-0", "csrf": csrf})
            await looping.wait(timeout=5)
            await asyncio.sleep(0.1)  # the stop's command outcome is recorded after the stop
            await client.get("/reconcile")  # a dry run: outcomes counted with mode=dry_run
            response = await client.get("/metrics")
        await app.aclose()
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(response.text)
    t = "chongming_transitions_total"
    assert (
        value(found, t, from_status="running", to_status="succeeded", trigger="executor:completed")
        == 5
    )
    assert (
        value(found, t, from_status="running", to_status="failed", trigger="executor:failed") == 1
    )
    assert value(found, t, from_status="running", to_status="stopping", trigger="user:stop") == 1
    h = "chongming_attempt_duration_seconds_count"
    assert value(found, h, name="quick", outcome="succeeded") == 5
    assert value(found, h, name="broken", outcome="failed") == 1
    assert value(found, h, name="endless", outcome="stopped") == 1
    assert value(found, "chongming_store_write_seconds_count") >= 3
    assert value(found, "chongming_store_writes_total", outcome="written") >= 7
    assert value(found, "chongming_command_apply_latency_seconds_count", kind="stop") == 1
    assert value(found, "chongming_store_tasks", status="succeeded") == 5
    assert value(found, "chongming_store_tasks", status="stopped") == 1
    assert value(found, "chongming_store_nodes", state="live") == 1
    assert value(found, "chongming_persist_failures_total") == 0
    assert value(found, "chongming_lease_renewals_total") >= 0
    assert value(found, "chongming_commands_applied_total") == 1
    assert value(found, "chongming_tasks", status="succeeded") == 5  # held by this process
    # No task id is ever a label.
    for _, labels in found:
        assert all(not v.startswith(("q-", "b-", "e-")) for _, v in labels)


async def test_queue_depth_and_running_per_bucket_come_from_the_store(tmp_path: Path) -> None:
    db = str(tmp_path / "tasks.db")
    node = Controller(store=db, owner="node-q", windows=FAST, max_parallel=1)
    register(node)
    async with node:
        first = await node.submit("endless", task_id="e-1", bucket_key="j")
        await node.submit("endless", task_id="e-2", bucket_key="j")  # waits: max_parallel=1
        while first.status is not TaskStatus.RUNNING:
            await asyncio.sleep(0.01)
        await node.enqueue("unserved", task_id="u-1")
        metrics = ChongmingMetrics()
        store = node.store
        assert store is not None
        await metrics.refresh_store(store)
        found = samples(metrics.exposition().decode())
        bucket = str(node.buckets.bucket_for("j"))
        assert value(found, "chongming_store_queue_depth", bucket=bucket) == 1
        assert value(found, "chongming_store_queue_depth", bucket="none") == 1
        assert value(found, "chongming_store_running", bucket=bucket) == 1
        await node.stop_all()


async def test_label_cardinality_is_bounded() -> None:
    metrics = ChongmingMetrics(max_names=3)
    async with Controller(observers=[metrics]) as controller:

        async def job(ctx: object) -> None:
            return None

        for i in range(10):
            controller.register(f"name-{i}", job)
            await controller.submit(f"name-{i}", task_id=f"id-{i}")
        await controller.wait_all(timeout=10)
    found = samples(metrics.exposition().decode())
    names = {
        dict(labels)["name"]
        for (name, labels) in found
        if name == "chongming_attempt_duration_seconds_count"
    }
    assert names == {"name-0", "name-1", "name-2", "other"}
    assert (
        value(found, "chongming_attempt_duration_seconds_count", name="other", outcome="succeeded")
        == 7
    )


async def test_a_failing_observer_harms_nothing(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Observer):
        def transition(self, run: object, previous: TaskStatus) -> None:
            raise RuntimeError("observer bug")

        def wrap_attempt(self, run: object, coro: object) -> object:  # type: ignore[override]
            raise RuntimeError("observer bug")

    metrics = ChongmingMetrics()
    async with Controller(observers=[Broken(), metrics]) as controller:

        async def job(ctx: object) -> int:
            return 1

        controller.register("job", job)
        run = await controller.submit("job")
        outcome = await run.wait(timeout=5)
    assert outcome.status is TaskStatus.SUCCEEDED
    assert "observer bug" not in str(outcome)
    found = samples(metrics.exposition().decode())
    assert (
        value(found, "chongming_attempt_duration_seconds_count", name="job", outcome="succeeded")
        == 1
    )
    assert any("failed on a transition" in r.message for r in caplog.records)


async def test_the_standalone_metrics_app_serves_the_same_names(tmp_path: Path) -> None:
    from chongming.web.metrics import metrics_app

    metrics = ChongmingMetrics()
    db = str(tmp_path / "tasks.db")
    async with Controller(store=db, observers=[metrics], windows=FAST) as node:
        register(node)
        await node.submit("quick", task_id="q-1")
        await node.wait_all(timeout=10)
        app = metrics_app(metrics, node.store)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as client:
            scrape = await client.get("/anything")
            refused = await client.post("/", content=b"x")
    assert refused.status_code == 405
    found = samples(scrape.text)
    assert value(found, "chongming_store_tasks", status="succeeded") == 1
    assert (
        value(found, "chongming_attempt_duration_seconds_count", name="quick", outcome="succeeded")
        == 1
    )


async def test_the_standalone_metrics_app_answers_only_the_hosts_it_is_given() -> None:
    from chongming.web.metrics import metrics_app

    app = metrics_app(ChongmingMetrics(), allowed_hosts=["metrics.internal"])
    transport = httpx.ASGITransport(app=app)
    answers = {}
    for host in ("metrics.internal:9100", "127.0.0.1:9100", "localhost", "evil.example"):
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
            answers[host] = (await client.get("/metrics")).status_code
    assert answers == {
        "metrics.internal:9100": 200,
        "127.0.0.1:9100": 200,
        "localhost": 200,
        "evil.example": 403,  # a rebinding page's own name
    }
    anywhere = metrics_app(ChongmingMetrics())  # mounted: the service checks hosts itself
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=anywhere), base_url="http://evil.example"
    ) as client:
        assert (await client.get("/")).status_code == 200
    with pytest.raises(ValueError, match="not one string"):
        metrics_app(ChongmingMetrics(), allowed_hosts="metrics.internal")
