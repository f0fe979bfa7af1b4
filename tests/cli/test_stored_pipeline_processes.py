"""A stored pipeline survives ``kill -9`` of the worker that coordinates it.

Coordinator workers (``--names chongming:pipeline``) are SIGKILLed at random
moments mid-graph and replaced under new owners; a separate worker runs the
nodes (``--names node``), so every kill lands on the coordinator alone. Each
node appends its task id to a ledger when it runs. The pipeline finishes on
a later coordinator worker; every node ran exactly once; the sink's result
counts every node's result (so each node's upstream reached it).

``CHONGMING_PIPELINE_KILLS`` sets the number of kills (3 in ``make test``,
30 in ``make proofs``). Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from chongming import Controller, TaskSnapshot, TaskStatus
from chongming.pipeline import Pipeline
from tests.cli.test_durable_processes import _let_go, _started, worker_process
from tests.cli.test_worker_process import DEADLINE, _client_store, _finish, plane
from tests.tiers import proof_size

__all__ = ["plane"]

KILLS = proof_size("CHONGMING_PIPELINE_KILLS", reduced=3, full=30)
WIDTH = 4  # shards per wave
WAVES = max(3, KILLS)  # enough graph that every kill lands mid-graph

pytestmark = pytest.mark.timeout(120 + KILLS * 10)


def _worker(options: list[str], owner: str, names: str, logs: Path) -> subprocess.Popen[bytes]:
    command = ["worker", "--tasks", "tests.cli.pipeline_tasks", "--names", names]
    command += ["--max-parallel", str(WIDTH), "--lease-ttl", "1", "--grace", "2"]
    command += ["--poll-interval", "0.05"]
    return worker_process(options, owner, logs, command)


def waves(ledger: str) -> tuple[Pipeline, int]:
    """Root -> WIDTH shards -> a join -> WIDTH shards -> ... -> sink; and the sink's result."""
    pipeline = Pipeline("waves")
    last = [pipeline.node("node", ledger, 0.05, node_id="root")]
    value = {"root": 1}
    for wave in range(WAVES):
        shards = [
            pipeline.node("node", ledger, 0.2, node_id=f"w{wave}s{n}", depends_on=last)
            for n in range(WIDTH)
        ]
        for shard in shards:
            value[shard.node_id] = 1 + sum(value[u.node_id] for u in last)
        joined = pipeline.node("node", ledger, 0.05, node_id=f"w{wave}j", depends_on=shards)
        value[joined.node_id] = 1 + sum(value[s.node_id] for s in shards)
        last = [joined]
    return pipeline, value[last[0].node_id]


@pytest.mark.proof
async def test_kill_9_of_the_coordinators_worker_finishes_the_graph_running_each_node_once(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    options, where = plane
    ledger = tmp_path / "ledger.txt"
    rng = random.Random(7)
    pipeline, expected = waves(str(ledger))
    runner = await _started(_worker(options, "nodes", "node", tmp_path), tmp_path / "nodes.err")
    coordinator = await _started(
        _worker(options, "c-0", "chongming:pipeline", tmp_path), tmp_path / "c-0.err"
    )
    everyone = [runner, coordinator]
    client_store = _client_store(where)
    wait: asyncio.Future[TaskSnapshot] | None = None
    try:
        async with Controller(store=client_store, owner="client", poll_interval=0.05) as client:
            client.register("node", lambda ctx, ledger, hold: 0)  # checks the arguments here
            queued = await client.enqueue_pipeline(pipeline, run_id="waves")
            waiting = asyncio.ensure_future(queued.wait(timeout=DEADLINE * 4 + KILLS * 5))
            wait = waiting
            for kill in range(1, KILLS + 1):
                await asyncio.sleep(rng.uniform(0.2, 0.7))
                if waiting.done():
                    break
                coordinator.send_signal(signal.SIGKILL)
                await asyncio.to_thread(coordinator.wait, DEADLINE)
                owner = f"c-{kill}"
                coordinator = await _started(
                    _worker(options, owner, "chongming:pipeline", tmp_path),
                    tmp_path / f"{owner}.err",
                )
                everyone.append(coordinator)
            final = await waiting
            history = await client.history("waves")
            for worker in (runner, coordinator):
                worker.send_signal(signal.SIGTERM)
            codes = [await asyncio.to_thread(w.wait, DEADLINE) for w in (runner, coordinator)]
    finally:
        await _let_go(None, client_store if not isinstance(client_store, Path) else None)
        if wait is not None and not wait.done():
            wait.cancel()
        for worker in everyone:
            _finish(worker)
    assert codes == [0, 0]
    assert final.status is TaskStatus.SUCCEEDED, final.failure
    result = final.result
    node_ids = [node.node_id for node in pipeline.nodes]
    assert result["results"][node_ids[-1]] == expected
    ran = Counter(line.split()[0] for line in ledger.read_text().splitlines())
    assert ran == Counter({f"waves:{node}": 1 for node in node_ids})
    # The coordinator was claimed again after kills (parked, or mid-attempt: then resumed).
    claims = sum(t.trigger == "scheduler:dispatch" for t in history)
    resumed = sum(t.trigger == "reconcile:resumed" for t in history)
    print(f"kills {KILLS}: coordinator claimed {claims} times, resumed {resumed} times")
    assert claims > 1
