"""Proof: SIGKILL of workers while parents wait and children run, on SQLite and PostgreSQL.

Two worker processes serve ``tests.cli.children_tasks``; parents fan out
children that each take a moment. A random worker is SIGKILLed at random
moments and replaced. Every parent must succeed with the exact sum, each
with exactly its ``count`` children (a replayed parent never enqueues one
twice), every child succeeded, and each child's step was recorded by the
last attempt that ran it. Reduced size in ``make test`` (3 kills, 4
parents), 30 kills of 120 parents in ``make proofs`` (28 and 30 kills landed
before the work was done, measured; it prints the count).
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskSnapshot, TaskStatus
from tests.cli.test_durable_processes import _let_go, _started
from tests.cli.test_worker_process import DEADLINE, ROOT, _client_store, _finish, plane
from tests.tiers import proof_size

__all__ = ["plane"]

KILLS = proof_size("CHONGMING_CHILDREN_KILLS", reduced=3, full=30)
#: Enough work that the kills land while it runs: 4 parents were done after a few
#: of the 30 kills of the full size, 60 after 17.
PARENTS = proof_size("CHONGMING_CHILDREN_PARENTS", reduced=4, full=120)
CHILDREN = 6

pytestmark = pytest.mark.timeout(120 + KILLS * 10)


def _worker(options: list[str], owner: str, logs: Path) -> object:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["worker", "--tasks", "tests.cli.children_tasks", "--max-parallel", "3"]
    command += ["--lease-ttl", "1.0", "--grace", "2"]
    with (logs / f"{owner}.err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
            stdout=subprocess.PIPE, stderr=err, bufsize=0, cwd=ROOT, env=env,
        )  # fmt: skip


@pytest.mark.proof
async def test_kill_9_while_children_run_enqueues_each_child_once(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    options, where = plane
    ledger = tmp_path / "ledger.txt"
    rng = random.Random(24)

    async def start(owner: str) -> object:
        return await _started(_worker(options, owner, tmp_path), tmp_path / f"{owner}.err")  # type: ignore[arg-type]

    workers = [await start(f"w-{n}") for n in range(2)]
    everyone = list(workers)
    client_store = _client_store(where)
    waits: asyncio.Future[list[TaskSnapshot]] | None = None
    try:
        client = Controller(store=client_store, owner="client", poll_interval=0.05)
        async with client:
            store = client.store
            assert store is not None
            queued = [
                await client.enqueue("fan_parent", str(ledger), CHILDREN, 0.15, task_id=f"p-{n}")
                for n in range(PARENTS)
            ]
            waits = asyncio.ensure_future(
                asyncio.gather(*(task.wait(timeout=DEADLINE * 4 + KILLS * 5) for task in queued))
            )
            for kills in range(1, KILLS + 1):
                if waits.done():
                    break
                await asyncio.sleep(rng.uniform(0.2, 0.8))
                victim = workers.pop(rng.randrange(len(workers)))
                victim.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
                await asyncio.to_thread(victim.wait, DEADLINE)  # type: ignore[attr-defined]
                workers.append(await start(f"w-r{kills}"))
                everyone.append(workers[-1])
            print(f"\n{len(everyone) - 2} workers killed while {PARENTS} parents ran")
            try:
                finals = await waits
            except TimeoutError:
                raise AssertionError(await _where_they_stand(store, queued)) from None
            children = {task.task_id: await store.children_of(task.task_id) for task in queued}
            ends = {
                child: await store.get(child) for family in children.values() for child in family
            }
            steps = {child: await store.steps(child) for child in ends}
            for worker in workers:
                worker.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
            codes = [await asyncio.to_thread(w.wait, DEADLINE) for w in workers]  # type: ignore[attr-defined]
            await client.close(close_store=True)
    finally:
        await _let_go(waits, client_store)
        for worker in everyone:
            _finish(worker)  # type: ignore[arg-type]
    assert codes == [0] * len(workers)
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * PARENTS
    assert [final.result for final in finals] == [sum(range(CHILDREN))] * PARENTS
    assert all(len(family) == CHILDREN for family in children.values()), children
    for child, end in ends.items():
        assert end is not None
        assert end.status is TaskStatus.SUCCEEDED, (child, end.status)
    runs: dict[str, list[int]] = defaultdict(list)
    for line in ledger.read_text().splitlines():
        child, epoch, _pid = line.split()
        runs[child].append(int(epoch))
    for child, recorded in steps.items():
        (mark,) = recorded
        assert max(runs[child]) == mark.epoch, (child, runs[child], mark.epoch)


async def _where_they_stand(store: Any, queued: list[Any]) -> str:
    """What a timed-out proof reports: each parent's row, last transitions and children."""
    lines = ["the parents did not all end in time:"]
    for task in queued:
        parent = await store.get(task.task_id)
        steps = [(t.to_status.value, t.trigger) for t in await store.history(task.task_id)][-4:]
        lines.append(
            f"  {task.task_id}: {parent.status.value} owner={parent.owner}"
            f" not_before={parent.not_before} last={steps}"
        )
        for child in await store.children_of(task.task_id):
            found = await store.get(child)
            lines.append(f"    {child}: {found.status.value} owner={found.owner}")
        facts = [fact.name for fact in await store.facts(task.task_id)]
        lines.append(f"    facts: {facts}")
    return "\n".join(lines)
