"""Durable tasks survive ``kill -9`` of their workers: every task succeeds, no recorded step reruns.

Two ``chongming worker`` processes run ten-step durable tasks; the test
SIGKILLs a random worker at random moments and starts a replacement (under a
new owner name). Each step's body appends a ledger line naming the attempt's
epoch; the store names the epoch that recorded the step. So:

- every task ends ``succeeded`` and every step is recorded;
- no step body ran in an attempt after the one that recorded it (a
  memoised step is replayed, never run again); a step that a kill cut off
  before its record ran again (at least once: the ledger may hold it twice);
- each history shows its lost attempts (``running -> retry_wait`` by
  ``reconcile:lease_expired``), one per kill that hit the task mid-run;
- each step's operation (``ctx.effect``, committing a row into a side table
  of the store's own database) left exactly one row.

``CHONGMING_DURABLE_KILLS`` sets the number of kills (5 in ``make test``,
100 in ``make proofs``). Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from chongming import Controller, TaskSnapshot, TaskStatus, TaskStore
from chongming.state.query import TaskQuery
from chongming.state.status import ACTIVE_STATUSES
from chongming.state.triggers import Trigger
from tests.cli.test_processes import _Lines
from tests.cli.test_worker_process import DEADLINE, ROOT, _client_store, _finish, plane
from tests.stores.pg_support import admin_connection
from tests.tiers import proof_size

__all__ = ["plane"]


async def _let_go(waits: asyncio.Future[list[TaskSnapshot]] | None, store: object) -> None:
    """On a failure, end what the test left waiting, so no task or connection outlives it."""
    if waits is not None and not waits.done():
        waits.cancel()
        await asyncio.gather(waits, return_exceptions=True)
    if isinstance(store, TaskStore):
        await store.close()


KILLS = proof_size("CHONGMING_DURABLE_KILLS", reduced=5, full=100)
TASKS = max(8, KILLS * 4)  # enough work that every kill lands while tasks run
TTL = 1.0

pytestmark = pytest.mark.timeout(120 + KILLS * 10)


def worker_process(
    options: list[str], owner: str, logs: Path, command: list[str]
) -> subprocess.Popen[bytes]:
    """``chongming <options> --owner <owner> <command>``, its stderr in ``logs/<owner>.err``."""
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    with (logs / f"{owner}.err").open("wb") as err:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
            stdout=subprocess.PIPE,
            stderr=err,
            bufsize=0,
            cwd=ROOT,
            env=env,
        )


def _worker(
    options: list[str], owner: str, logs: Path, *, ttl: float = TTL
) -> subprocess.Popen[bytes]:
    command = ["worker", "--tasks", "tests.cli.durable_tasks", "--max-parallel", "3"]
    command += ["--lease-ttl", str(ttl), "--grace", "2"]
    return worker_process(options, owner, logs, command)


async def _started(worker: subprocess.Popen[bytes], log: Path) -> subprocess.Popen[bytes]:
    try:
        await asyncio.to_thread(_Lines(worker).next)  # "serving ..."
    except AssertionError:
        said = await asyncio.to_thread(log.read_text)
        raise AssertionError(f"a worker did not start: {said}") from None
    return worker


async def _side_table(where: object) -> str:
    """A table in the store's own database, where each effect's commit inserts a row."""
    if isinstance(where, Path):

        def create() -> None:
            with sqlite3.connect(where) as conn:
                conn.execute("CREATE TABLE side_effects (op TEXT NOT NULL)")

        await asyncio.to_thread(create)
        return "side_effects"
    assert isinstance(where, tuple)
    schema = str(where[1])
    async with admin_connection() as conn:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await conn.execute(f'CREATE TABLE "{schema}".side_effects (op text NOT NULL)')
    return f'"{schema}".side_effects'


async def _rows(where: object, table: str) -> list[str]:
    if isinstance(where, Path):

        def read() -> list[str]:
            with sqlite3.connect(where) as conn:
                return [row[0] for row in conn.execute(f"SELECT op FROM {table}")]

        return await asyncio.to_thread(read)
    async with admin_connection() as conn:
        return [row["op"] for row in await conn.fetch(f"SELECT op FROM {table}")]


@pytest.mark.proof
async def test_kill_9_of_workers_never_reruns_a_recorded_step(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    options, where = plane
    ledger = tmp_path / "ledger.txt"
    table = await _side_table(where)
    rng = random.Random(11)
    workers = [
        await _started(_worker(options, f"w-{n}", tmp_path), tmp_path / f"w-{n}.err")
        for n in range(2)
    ]
    everyone = list(workers)
    client_store = _client_store(where)
    waits: asyncio.Future[list[TaskSnapshot]] | None = None
    try:
        client = Controller(store=client_store, owner="client", poll_interval=0.05)
        async with client:
            store = client.store
            assert store is not None
            queued = [
                await client.enqueue("ten_steps", str(ledger), 0.1, table, task_id=f"d-{n}")
                for n in range(TASKS)
            ]
            waits = asyncio.ensure_future(
                asyncio.gather(*(task.wait(timeout=DEADLINE * 4 + KILLS * 5) for task in queued))
            )
            kills = 0
            while kills < KILLS and not waits.done():
                await asyncio.sleep(rng.uniform(0.1, 0.6))
                victim = workers.pop(rng.randrange(len(workers)))
                victim.send_signal(signal.SIGKILL)
                await asyncio.to_thread(victim.wait, DEADLINE)
                kills += 1
                owner = f"w-r{kills}"
                workers.append(
                    await _started(_worker(options, owner, tmp_path), tmp_path / f"{owner}.err")
                )
                everyone.append(workers[-1])
                if not waits.done() and all(t.is_terminal for t in [await q.get() for q in queued]):
                    break
            finals = await waits
            steps = {task.task_id: await store.steps(task.task_id) for task in queued}
            histories = {task.task_id: await store.history(task.task_id) for task in queued}
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            codes = [await asyncio.to_thread(w.wait, DEADLINE) for w in workers]
            await client.close(close_store=True)
        rows = await _rows(where, table)
    finally:
        await _let_go(waits, client_store)
        for worker in everyone:
            _finish(worker)
    assert codes == [0] * len(workers)
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * TASKS
    runs: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in ledger.read_text().splitlines():
        task_id, name, epoch, _pid = line.split()
        runs[task_id, name].append(int(epoch))
    lost_attempts = 0
    for task_id, recorded in steps.items():
        assert [s.name for s in recorded] == [f"s{n}" for n in range(10)]
        for record in recorded:
            epochs = runs[task_id, record.name]
            assert record.epoch in epochs  # the recording attempt ran it
            assert max(epochs) == record.epoch, (task_id, record.name, epochs)  # never after
        lost = [
            t
            for t in histories[task_id]
            if t.trigger == Trigger.LEASE_EXPIRED and t.to_status is TaskStatus.RETRY_WAIT
        ]
        lost_attempts += len(lost)
        assert all(t.from_status is not TaskStatus.QUEUED for t in lost)
    assert sorted(rows) == sorted(f"d-{t}:row:{n}" for t in range(TASKS) for n in range(10))
    # Some kills hit a running task (the others hit idle workers): those show as lost attempts.
    assert kills == 0 or lost_attempts >= 1


RESTARTS = proof_size("CHONGMING_DURABLE_RESTARTS", reduced=4, full=40)


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


def _graceful_worker(options: list[str], owner: str, logs: Path) -> subprocess.Popen[bytes]:
    """A worker with a grace shorter than a task: SIGTERM finds durable tasks mid-run."""
    command = ["worker", "--tasks", "tests.cli.durable_tasks", "--max-parallel", "3"]
    command += ["--lease-ttl", "30", "--grace", "0.2"]  # a lapsed lease cannot be what saves them
    return worker_process(options, owner, logs, command)


@pytest.mark.slow
@pytest.mark.proof
async def test_sigterm_of_every_worker_in_turn_hands_durable_work_back(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    """A deploy loses no durable work (issue 22): SIGTERM is never worse than kill -9.

    Was: a SIGTERMed worker recorded its running durable tasks ``stopped`` for
    good. Now each goes back to the queue (``runtime:handed_back``) and the
    next worker replays it: every task succeeds, no recorded step runs again,
    every operation commits once, and none of it waited for a lease to lapse
    (the lease is 30 s; the test is over long before).
    ``CHONGMING_DURABLE_RESTARTS`` sets the number of restarts (4 in ``make
    test``, 40 in ``make proofs``).
    """
    options, where = plane
    ledger = tmp_path / "ledger.txt"
    table = await _side_table(where)
    tasks = max(16, RESTARTS * 8)
    started = 0

    async def start() -> subprocess.Popen[bytes]:
        nonlocal started
        started += 1
        owner = f"w-{started}"
        return await _started(_graceful_worker(options, owner, tmp_path), tmp_path / f"{owner}.err")

    workers = [await start(), await start()]
    owners = ["w-1", "w-2"]
    everyone = list(workers)
    handed_back = 0
    client_store = _client_store(where)
    waits: asyncio.Future[list[TaskSnapshot]] | None = None
    try:
        client = Controller(store=client_store, owner="client", poll_interval=0.05)
        async with client:
            store = client.store
            assert store is not None
            queued = [
                await client.enqueue("ten_steps", str(ledger), 0.1, table, task_id=f"g-{n}")
                for n in range(tasks)
            ]
            waits = asyncio.ensure_future(
                asyncio.gather(*(task.wait(timeout=DEADLINE * 4 + RESTARTS * 5) for task in queued))
            )
            codes = []
            for restart in range(RESTARTS):
                if waits.done():
                    break
                index = restart % len(workers)
                if not await _until_running_on(client, owners[index]):
                    break  # a SIGTERM mid-task, while there is work left
                old = workers[index]
                old.send_signal(signal.SIGTERM)
                codes.append(await asyncio.to_thread(old.wait, DEADLINE))
                workers[index] = await start()
                owners[index] = f"w-{started}"
                everyone.append(workers[index])
            finals = await waits
            steps = {task.task_id: await store.steps(task.task_id) for task in queued}
            histories = {task.task_id: await store.history(task.task_id) for task in queued}
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            codes += [await asyncio.to_thread(w.wait, DEADLINE) for w in workers]
            await client.close(close_store=True)
        rows = await _rows(where, table)
    finally:
        await _let_go(waits, client_store)
        for worker in everyone:
            _finish(worker)
    assert codes == [0] * len(codes)
    assert [final.status for final in finals] == [TaskStatus.SUCCEEDED] * tasks
    runs: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in ledger.read_text().splitlines():
        task_id, name, epoch, _pid = line.split()
        runs[task_id, name].append(int(epoch))
    for task_id, recorded in steps.items():
        assert [s.name for s in recorded] == [f"s{n}" for n in range(10)]
        for record in recorded:
            epochs = runs[task_id, record.name]
            assert max(epochs) == record.epoch, (task_id, record.name, epochs)  # never after
        moves = [(t.to_status, t.trigger) for t in histories[task_id]]
        handed_back += moves.count((TaskStatus.QUEUED, Trigger.HANDED_BACK))
        assert not [m for m in moves if m[1] == Trigger.LEASE_EXPIRED]  # no crash recovery
        assert TaskStatus.STOPPED not in {status for status, _ in moves}
        assert TaskStatus.LOST not in {status for status, _ in moves}
    assert sorted(rows) == sorted(f"g-{t}:row:{n}" for t in range(tasks) for n in range(10))
    assert handed_back >= 1  # the restarts did land while tasks ran


async def test_system_exit_in_a_task_or_step_fails_it_and_the_worker_serves_on(
    tmp_path: Path,
) -> None:
    """Issue 22, case 4. Was: the loop ended, the process hung, the task stayed ``running``."""
    db = tmp_path / "tasks.db"
    worker = await _started(_worker(["--db", str(db)], "w-0", tmp_path), tmp_path / "w-0.err")
    try:
        async with Controller(store=db, owner="client", poll_interval=0.05) as client:
            exits = await client.enqueue("exits", 3, task_id="e-1")
            in_step = await client.enqueue("exits_in_a_step", 4, task_id="e-2")
            failed = [await exits.wait(timeout=DEADLINE), await in_step.wait(timeout=DEADLINE)]
            ledger = tmp_path / "ledger.txt"
            after = await client.enqueue("ten_steps", str(ledger), 0.0, task_id="after")
            served = await after.wait(timeout=DEADLINE)
            store = client.store
            assert store is not None
            steps = await store.steps("e-2")
            worker.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(worker.wait, DEADLINE)
    finally:
        _finish(worker)
    assert [f.status for f in failed] == [TaskStatus.FAILED] * 2
    for final in failed:
        assert final.failure is not None
        assert final.failure.exception_type == "SystemExit"
        assert final.failure.retryable is False
    assert steps == []  # a SystemExit is not the step's outcome
    assert served.status is TaskStatus.SUCCEEDED  # the same process serves on
    assert code == 0
