"""Three ``chongming worker`` processes drain one queue: every task runs exactly once.

Each task appends its key to a ledger file (one ``O_APPEND`` write per
execution, from whichever worker process ran it), so the ledger counts real
executions, not what the store says. Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskStatus
from chongming.state.query import TaskQuery
from chongming.state.status import ACTIVE_STATUSES
from chongming.state.triggers import Trigger
from tests.cli.test_processes import _Lines
from tests.cli.test_worker_process import DEADLINE, ROOT, _client_store, _finish, _start, plane
from tests.tiers import proof_size

__all__ = ["plane"]

TASKS = 300


async def test_three_workers_run_every_task_exactly_once(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    options, where = plane
    ledger = tmp_path / "ledger.txt"
    workers = [_start(options, "--max-parallel", "4", owner=f"w-{n}") for n in range(3)]
    try:
        for worker in workers:
            await asyncio.to_thread(_Lines(worker).next)  # "serving ..."
        client = Controller(store=_client_store(where), owner="client")
        async with client:
            rng = random.Random(7)
            queued = [
                await client.enqueue(
                    "mark",
                    str(ledger),
                    f"k-{n:03d}",
                    task_id=f"m-{n:03d}",
                    priority=rng.randint(0, 3),
                )
                for n in range(TASKS)
            ]
            finals = [await task.wait(timeout=DEADLINE * 2) for task in queued]
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            codes = [await asyncio.to_thread(worker.wait, DEADLINE) for worker in workers]
            await client.close(close_store=True)
    finally:
        for worker in workers:
            _finish(worker)
    assert codes == [0, 0, 0]
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * TASKS
    runs = Counter(line.split()[0] for line in ledger.read_text().splitlines())
    assert len(runs) == TASKS  # none missing
    assert set(runs.values()) == {1}  # none twice
    # Which worker took how many is up to timing; every task ran on one of them.
    assert {final.owner for final in finals} <= {"w-0", "w-1", "w-2"}


async def test_a_rolling_restart_under_load_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path,
) -> None:
    db = tmp_path / "tasks.db"
    ledger = tmp_path / "ledger.txt"
    options = ["--db", str(db)]
    started = 0

    def start() -> Any:
        nonlocal started
        started += 1
        return _start(options, "--max-parallel", "2", "--grace", "10", owner=f"w-{started}")

    workers = [start() for _ in range(3)]
    try:
        for worker in workers:
            await asyncio.to_thread(_Lines(worker).next)
        async with Controller(store=db, owner="client") as client:
            queued = [
                # About 12 s of work on 6 slots: the first restarted worker is up long before.
                await client.enqueue("mark", str(ledger), f"k-{n:03d}", seconds=0.3)
                for n in range(240)
            ]
            store = client.store
            assert store is not None
            assert sum(count.count for count in await store.task_counts(active_only=True)) > 0
            for index in range(3):  # restart every worker, one by one, while they drain
                old = workers[index]
                old.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(old.wait, DEADLINE) == 0
                _finish(old)
                workers[index] = start()
                await asyncio.to_thread(_Lines(workers[index]).next)
            finals = [await task.wait(timeout=DEADLINE * 2) for task in queued]
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            await asyncio.to_thread(worker.wait, DEADLINE)
            _finish(worker)
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * 240
    runs = Counter(line.split()[0] for line in ledger.read_text().splitlines())
    assert len(runs) == 240
    assert set(runs.values()) == {1}
    owners = {final.owner for final in finals}
    assert owners & {"w-1", "w-2", "w-3"}  # the first generation ran some
    assert owners & {"w-4", "w-5", "w-6"}  # and the restarted ones took over the rest


RESTARTS = proof_size("CHONGMING_QUEUE_RESTARTS", reduced=3, full=30)


async def _until_running_on(client: Controller, owner: str) -> bool:
    """Wait until ``owner`` runs a task (the SIGTERM that follows finds work mid-run).

    False once no task is left to run at all (the queue drained first).
    """
    running = TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), owner=owner, limit=1)
    active = TaskQuery(statuses=ACTIVE_STATUSES, limit=1)
    async with asyncio.timeout(DEADLINE):
        while not await client.list_tasks(running):
            if not await client.list_tasks(active):
                return False
            await asyncio.sleep(0.02)
    return True


@pytest.mark.slow
@pytest.mark.proof
async def test_sigterm_mid_task_hands_retryable_work_back_to_another_worker(
    tmp_path: Path,
) -> None:
    """Issue 22: a grace shorter than the tasks, so every SIGTERM finds work mid-run.

    Each interrupted task (it honours the stop at a checkpoint, before its
    mark) goes back to the queue while its retry policy has attempts left,
    and another worker runs it: every task succeeds, each marks the ledger
    once, and nothing is ``stopped`` or ``lost``. ``CHONGMING_QUEUE_RESTARTS``
    sets the number of restarts (3 in ``make test``, one per worker; 30 in
    ``make proofs``).
    """
    db = tmp_path / "tasks.db"
    ledger = tmp_path / "ledger.txt"
    options = ["--db", str(db)]
    started = 0
    tasks = max(90, RESTARTS * 30)

    def start() -> Any:
        nonlocal started
        started += 1
        env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
        env["PYTHONPATH"] = str(ROOT)
        command = ["worker", "--tasks", "tests.cli.restart_tasks", "--max-parallel", "3"]
        command += ["--grace", "0.1"]
        return subprocess.Popen(
            [sys.executable, "-m", "chongming", *options, "--owner", f"w-{started}", *command],
            stdout=subprocess.PIPE,
            bufsize=0,
            cwd=ROOT,
            env=env,
        )

    workers = [start() for _ in range(3)]
    owners = [f"w-{n}" for n in range(1, 4)]
    codes = []
    try:
        for worker in workers:
            await asyncio.to_thread(_Lines(worker).next)
        async with Controller(store=db, owner="client") as client:
            queued = [
                await client.enqueue("mark_patiently", str(ledger), f"k-{n:03d}", 0.3)
                for n in range(tasks)
            ]
            for restart in range(RESTARTS):
                index = restart % len(workers)
                if not await _until_running_on(client, owners[index]):
                    break
                old = workers[index]
                old.send_signal(signal.SIGTERM)
                codes.append(await asyncio.to_thread(old.wait, DEADLINE))
                _finish(old)
                workers[index] = start()
                owners[index] = f"w-{started}"
                await asyncio.to_thread(_Lines(workers[index]).next)
            finals = [await task.wait(timeout=DEADLINE * 2) for task in queued]
            histories = [await client.history(task.task_id) for task in queued]
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            codes.append(await asyncio.to_thread(worker.wait, DEADLINE))
            _finish(worker)
    assert codes == [0] * len(codes)
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * tasks
    runs = Counter(line.split()[0] for line in ledger.read_text().splitlines())
    assert len(runs) == tasks
    assert set(runs.values()) == {1}  # an interrupted attempt never reached its mark
    handed_back = sum(  # a plain task goes back as the retry it is
        1 for history in histories for t in history if t.trigger == Trigger.RETRY_RELEASED
    )
    assert handed_back >= 1  # the restarts did land mid-task
    for history in histories:
        assert not {TaskStatus.STOPPED, TaskStatus.LOST} & {t.to_status for t in history}
