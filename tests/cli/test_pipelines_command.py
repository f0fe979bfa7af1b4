"""``chongming pipelines``: stored pipeline runs, and one of them as a graph of node statuses.

Each run is driven by an in-process worker on a SQLite file; the CLI opens
the file itself, in a thread, once this loop no longer holds it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from chongming import Controller, JoinMode, Pipeline, TaskContext, TaskStatus
from chongming.controller.pipeline_view import node_statuses
from tests.cli.support import as_json, assert_one_line_error, invoke

S = TaskStatus

released = asyncio.Event()


async def fetch(ctx: TaskContext, day: str, *, gated: bool = False) -> list[int]:
    if gated:
        await released.wait()
    return [1, 2, 3]


async def transform(ctx: TaskContext, shard: int, *, fail: bool = False) -> int:
    if fail:
        raise ValueError(f"shard {shard} is corrupt")
    return shard * 10


async def load(ctx: TaskContext) -> str:
    return "loaded"


async def audit(ctx: TaskContext) -> str:
    return "audited"


def _register(controller: Controller) -> None:
    controller.register("fetch", fetch)
    controller.register("transform", transform)
    controller.register("load", load)
    controller.register("audit", audit)


def etl(*, failing: int | None = None, gated: bool = False) -> Pipeline:
    pipeline = Pipeline("etl")
    fetched = pipeline.node("fetch", "2026-12-04", node_id="fetch", gated=gated)
    shards = [
        pipeline.node("transform", n, node_id=f"s{n}", depends_on=[fetched], fail=(n == failing))
        for n in range(3)
    ]
    loaded = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[loaded], join=JoinMode.ALL_SETTLED)
    return pipeline


def _controllers(db: Path) -> tuple[Controller, Controller]:
    client = Controller(store=db, owner="client", poll_interval=0.05)
    worker = Controller(
        store=db, owner="w-1", work=True, max_parallel=4, poll_interval=0.05, park_threshold=0.0
    )
    _register(client)
    _register(worker)
    return client, worker


async def _cli(db: Path, *args: str) -> Any:
    return await asyncio.to_thread(invoke, db, "pipelines", *args)


async def test_a_finished_run_is_listed_and_shown_as_a_graph(tmp_path: Path) -> None:
    db = tmp_path / "etl.db"
    client, worker = _controllers(db)
    async with client, worker:
        queued = await client.enqueue_pipeline(etl(), run_id="nightly")
        assert (await queued.wait(timeout=60)).status is TaskStatus.SUCCEEDED
    listed = as_json(await _cli(db, "--json"))["pipelines"]
    assert [(run["run_id"], run["status"], run["counts"]) for run in listed] == [
        ("nightly", "succeeded", {"succeeded": 6})
    ]
    table = await _cli(db)
    assert table.exit_code == 0, table.stderr
    (row,) = table.stdout.splitlines()[2:]  # after RUN and its dashes
    assert row.split()[:3] == ["nightly", "etl", "succeeded"]
    assert "6 succeeded" in row

    shown = await _cli(db, "nightly")
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "pipeline nightly (etl, fail_fast): succeeded - 6 nodes: 6 succeeded"
    rows = {line.split()[0]: line.split() for line in lines[4:] if line.strip()}  # after NODE, ---
    assert list(rows) == ["fetch", "s0", "s1", "s2", "load", "audit"]
    assert rows["fetch"][1:] == ["fetch", "succeeded", "-"]
    assert rows["load"][2:] == ["succeeded", "<-", "s0,", "s1,", "s2"]
    assert rows["audit"][2:] == ["succeeded", "<-", "load", "(all_settled)"]
    graph = as_json(await _cli(db, "nightly", "--json"))["pipeline"]
    assert graph["nodes"][1]["task_id"] == "nightly:s0"
    assert graph["nodes"][1]["depends_on"] == ["fetch"]


async def test_a_failed_run_shows_what_failed_what_was_skipped_and_what_never_ran(
    tmp_path: Path,
) -> None:
    db = tmp_path / "etl.db"
    client, worker = _controllers(db)
    async with client, worker:
        queued = await client.enqueue_pipeline(etl(failing=1), run_id="broken")
        assert (await queued.wait(timeout=60)).status is TaskStatus.FAILED
    graph = as_json(await _cli(db, "broken", "--json"))["pipeline"]
    statuses = {node["id"]: node["status"] for node in graph["nodes"]}
    assert statuses["s1"] == "failed"
    assert statuses["load"] == "skipped"  # its join can no longer hold: never spawned
    assert statuses["audit"] == "cancelled"  # fail-fast ended the run first
    assert [n["task_id"] for n in graph["nodes"] if n["id"] in ("load", "audit")] == [None, None]
    shown = await _cli(db, "broken")
    assert "s1: shard 1 is corrupt" in shown.stdout


async def test_a_running_run_shows_its_waiting_nodes_blocked(tmp_path: Path) -> None:
    db = tmp_path / "etl.db"
    client, worker = _controllers(db)
    released.clear()
    async with client, worker:
        queued = await client.enqueue_pipeline(etl(gated=True), run_id="live")
        for _ in range(600):
            rows = {task.task_id: task.status for task in await client.list_tasks()}
            if (rows.get("live:fetch"), rows.get("live")) == (S.RUNNING, S.QUEUED):
                break  # the node runs, and its coordinator parked for it
            await asyncio.sleep(0.05)
        graph = as_json(await _cli(db, "live", "--json"))["pipeline"]
        shown = await _cli(db, "live")
        released.set()
        assert (await queued.wait(timeout=60)).status is TaskStatus.SUCCEEDED
    # The coordinator waits off its slot (parked) while its first node runs.
    assert (graph["status"], graph["parked"]) == ("queued", True)
    assert "live (etl, fail_fast): queued (parked until a node ends)" in shown.stdout
    assert [node["status"] for node in graph["nodes"]] == ["running"] + ["blocked"] * 5


def test_inferred_statuses_follow_the_join_rules() -> None:
    nodes = [
        {"id": "a", "depends_on": [], "join": "all_succeeded"},
        {"id": "b", "depends_on": ["a"], "join": "all_succeeded"},
        {"id": "c", "depends_on": ["a"], "join": "any_succeeded"},
        {"id": "d", "depends_on": ["b", "c"], "join": "all_settled"},
    ]
    failed = {"a": "failed"}
    assert node_statuses(nodes, failed, coordinator_live=True) == {
        "a": "failed", "b": "blocked", "c": "blocked", "d": "blocked",
    }  # fmt: skip
    assert node_statuses(nodes, failed, coordinator_live=False) == {
        "a": "failed", "b": "skipped", "c": "skipped", "d": "cancelled",
    }  # fmt: skip
    stopped = {"a": "succeeded", "b": "stopped"}
    assert node_statuses(nodes, stopped, coordinator_live=False)["c"] == "cancelled"


async def test_bad_input_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "etl.db"
    async with Controller(store=db, owner="client") as client:
        _register(client)
        await client.enqueue("load", task_id="plain")
    empty = await _cli(db)
    assert empty.exit_code == 0
    assert empty.stdout.strip() == "no stored pipelines (controller.enqueue_pipeline stores one)"
    line = assert_one_line_error(await _cli(db, "ghost"))
    assert "ghost" in line
    line = assert_one_line_error(await _cli(db, "plain"))
    assert "task 'plain' is a 'load' task, not a stored pipeline" in line
    line = assert_one_line_error(await _cli(db, "--limit", "0"))
    assert "--limit must be at least 1, got 0" in line
