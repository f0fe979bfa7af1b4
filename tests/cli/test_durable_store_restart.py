"""The store crashes mid-step and mid-reconcile: no durable task is stranded (issue 14).

A throwaway PostgreSQL cluster (:mod:`tests.pg_cluster`) serves two
``chongming worker`` processes (lease TTL 1 s, so they reconcile every
second) running durable tasks of :mod:`tests.cli.durable_restart_tasks`:
memoised steps, operations through ``ctx.effect`` committing into a side
table of the same database, and per kind a short sleep (in its slot), a sleep
long enough to park, a wait for a fact the test sends after the first crash,
or a wait for a fact nobody sends. The server is crashed twice with
``pg_ctl -m immediate``:

1. while steps are being recorded (``MIDWAY`` step bodies ran, tasks are
   running), and kept down ``DOWN`` seconds: three lease TTLs, so every lease
   has expired by the store's clock when it is back and the first reconciles
   run against a store that just came back, finding every owner dead. Once it
   is back the test sends the facts and enqueues a second wave of tasks;
2. right after SIGKILL of a worker that holds running tasks, while its lease
   is still valid: the survivor's periodic reconciles run into the outage,
   and only a reconcile against the restarted store can take those tasks
   over. A replacement worker joins once it is back.

Then, within ``BOUND`` seconds of the second restart, every task must be
terminal or visibly waiting: ``succeeded`` with all its steps, or waiting for
the unsent fact (in its slot under a live worker, or parked: no owner, a
``not_before`` ahead). None failed because a call of its journal met the
server away: the journal waits for the store as the write-through does.
None is stranded (no carrier status under a dead or no owner, nothing queued
under a dead owner, nothing left queued past the bound). The killed worker's
running tasks all succeed after a lost attempt; each operation committed at
most one row, and every finished one exactly one; each recorded step's body
ran exactly once in the attempt that recorded it and never after (a step cut
off before its record may have run again: at least once); every history folds
to its snapshot; the workers survived both outages (they exit 0 on SIGTERM,
their reconciles logged the outage) and logged no traceback (asyncpg's own
logged retries of its pool floor aside).

``CHONGMING_STORE_RESTART_TASKS`` sets the tasks per kind (2 in ``make test``,
10 in ``make proofs``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from chongming import Controller, TaskStatus
from chongming.errors import StoreUnavailable
from chongming.state.audit import audit_history
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot
from chongming.state.triggers import Trigger
from chongming.stores.postgres import PostgresTaskStore
from tests.cli.durable_restart_tasks import KINDS, LATE_KINDS, STEPS, WAIT_AT
from tests.cli.test_processes import _Lines
from tests.cli.test_worker_process import ROOT, _finish
from tests.pg_cluster import PgCluster, pg_cluster
from tests.tiers import proof_size

__all__ = ["pg_cluster"]

PER_KIND = proof_size("CHONGMING_STORE_RESTART_TASKS", reduced=2, full=10)
TTL = 1.0
DOWN = 3 * TTL
MIDWAY = 6  # step bodies run before the first crash
BOUND = 60.0
SCHEMA = "chongming"

#: The store calls of a durable attempt's journal, as their failures would read.
_JOURNAL_CALLS = (
    "recording a step",
    "beginning operation",
    "finishing operation",
    "reading facts",
    "starting a durable attempt",
    "reading steps",
)
TABLE = "business.side_effects"

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.proof,
    pytest.mark.timeout(240 + 20 * PER_KIND),
]

_T = TypeVar("_T")


def _worker(dsn: str, owner: str, logs: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["worker", "--tasks", "tests.cli.durable_restart_tasks", "--max-parallel", "4"]
    command += ["--lease-ttl", str(TTL), "--grace", "2"]
    options = ["--db", dsn, "--schema", SCHEMA, "--owner", owner]
    with (logs / f"{owner}.err").open("wb") as err:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "chongming", *options, *command],
            stdout=subprocess.PIPE,
            stderr=err,
            bufsize=0,
            cwd=ROOT,
            env=env,
        )


async def _started(worker: subprocess.Popen[bytes], log: Path) -> subprocess.Popen[bytes]:
    try:
        await asyncio.to_thread(_Lines(worker).next)  # "serving ..."
    except AssertionError:
        said = await asyncio.to_thread(log.read_text)
        raise AssertionError(f"a worker did not start: {said}") from None
    return worker


async def _patient(call: Callable[[], Awaitable[_T]], timeout: float = 30.0) -> _T:
    """``call()``, retried while the server is away (it is, for a while, on purpose)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _admin(dsn: str, sql: str) -> list[Any]:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


def _ledger(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _until(
    what: str,
    check: Callable[[], Awaitable[bool]],
    timeout: float,
    state: Callable[[], Awaitable[str]] | None = None,
) -> float:
    """Poll ``check`` until it holds; the seconds it took (fails naming ``what`` and the state)."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout:
            told = "" if state is None else f"; the tasks:\n{await state()}"
            raise AssertionError(f"not within {timeout:g}s: {what}{told}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


class _Fleet:
    def __init__(self, dsn: str, logs: Path) -> None:
        self.dsn = dsn
        self.logs = logs
        self.workers: dict[str, subprocess.Popen[bytes]] = {}

    async def start(self, *owners: str) -> None:
        """Start workers side by side; return once each says it serves."""
        for owner in owners:
            self.workers[owner] = _worker(self.dsn, owner, self.logs)
        await asyncio.gather(*(_started(self.workers[o], self.logs / f"{o}.err") for o in owners))

    def log(self, owner: str) -> str:
        return (self.logs / f"{owner}.err").read_text(errors="replace")

    def close(self) -> None:
        for worker in self.workers.values():
            _finish(worker)


@pytest.fixture
def fleet(pg_cluster: PgCluster, tmp_path: Path) -> Iterator[_Fleet]:
    fleet = _Fleet(pg_cluster.dsn, tmp_path)
    try:
        yield fleet
    finally:
        fleet.close()  # before the cluster goes (fixtures tear down in reverse)


async def _outage(cluster: PgCluster) -> float:
    """Crash the server, keep it down ``DOWN`` seconds, start it; when it accepts again."""
    await asyncio.to_thread(cluster.crash)
    await asyncio.sleep(DOWN)
    await asyncio.to_thread(cluster.start)
    return time.monotonic()


def _stranded(task: TaskSnapshot, live: set[str]) -> str | None:
    """Why ``task`` is stranded, or ``None``: it is terminal or visibly waiting."""
    if task.is_terminal:
        return None
    if task.status in (TaskStatus.QUEUED, TaskStatus.RETRY_WAIT):
        if task.owner is not None and task.owner not in live:
            return f"{task.status.value} under dead owner {task.owner!r}"
        return None  # claimable (or waiting for its not_before): judged by the bound
    if task.owner is None or task.owner not in live:
        return f"{task.status.value} with dead or no owner {task.owner!r}"
    return None


def _parked(task: TaskSnapshot) -> bool:
    """Off any slot, claimable again at a later time (a parked wait)."""
    return (
        task.status in (TaskStatus.QUEUED, TaskStatus.RETRY_WAIT)
        and task.owner is None
        and task.not_before is not None
        and task.not_before > datetime.now(UTC)
    )


def _outage_failure(task: TaskSnapshot) -> bool:
    """Failed because a call of its journal met the server away (it must wait instead)."""
    failure = task.failure
    return (
        task.status is TaskStatus.FAILED
        and failure is not None
        and failure.exception_type == "StoreUnavailable"
        and failure.message.startswith(_JOURNAL_CALLS)
    )


def _tracebacks(log: str) -> list[str]:
    """The tracebacks in a worker's log, less asyncpg's own logged retry of its pool floor."""
    lines = log.splitlines()
    found = []
    for n, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            # the worker prefixes each record with its time, level and logger
            if n and lines[n - 1].endswith("Failed to restore the pool connection floor; retrying"):
                continue  # asyncpg.pool logs its handled reconnects with exc_info
            found.append("\n".join(lines[max(0, n - 1) : n + 40]))
    return found


async def test_store_crashes_mid_step_and_mid_reconcile_strand_no_task(
    pg_cluster: PgCluster, fleet: _Fleet, tmp_path: Path
) -> None:
    cluster = pg_cluster
    ledger = tmp_path / "ledger.txt"
    await _admin(cluster.dsn, "CREATE SCHEMA business")
    await _admin(cluster.dsn, f"CREATE TABLE {TABLE} (op text NOT NULL)")
    await fleet.start("w-0", "w-1")
    kinds = {f"{kind}-{n}": kind for kind in KINDS for n in range(PER_KIND)}
    late = {f"late-{kind}-{n}": kind for kind in LATE_KINDS for n in range(PER_KIND)}
    reader = PostgresTaskStore(cluster.dsn, schema=SCHEMA, min_size=1, max_size=2)
    async with reader:

        async def enqueue(which: dict[str, str]) -> None:
            async with Controller(store=reader, owner="client") as client:
                for task_id, kind in which.items():
                    args = ("through_restarts", str(ledger), TABLE, kind)
                    await _patient(functools.partial(client.enqueue, *args, task_id=task_id))

        async def tasks() -> list[TaskSnapshot]:
            return await _patient(lambda: reader.query(TaskQuery(name="through_restarts")))

        async def live() -> set[str]:
            nodes = await _patient(reader.nodes)
            return {node.info.owner for node in nodes if node.live}

        async def state() -> str:
            return "\n".join([await _told(reader, t) for t in await tasks()])

        await enqueue(kinds)

        # 1. Crash while steps are being recorded; down past every lease.
        await _until(f"{MIDWAY} step bodies ran", _ran(ledger, MIDWAY), 30, state)
        running = [t.task_id for t in await tasks() if t.status is TaskStatus.RUNNING]
        assert running, "no task was running when the server crashed"
        before = len(_ledger(ledger))
        await _outage(cluster)
        # Once it is back: the facts the "fact" tasks wait for, and more work.
        async with Controller(store=reader, owner="signaller") as client:
            for task_id in (t for t, kind in kinds.items() if kind == "fact"):
                await _patient(functools.partial(client.signal, task_id, "go", {"sent": "after"}))
        await enqueue(late)
        kinds.update(late)
        await _until("steps ran again after the restart", _ran(ledger, before + MIDWAY), 30, state)
        assert all(w.poll() is None for w in fleet.workers.values()), "a worker died"

        # 2. SIGKILL a worker holding running tasks, and crash at once: its lease is still
        # valid, so only a reconcile against the restarted store can resume its tasks
        # (while the survivor's reconciles run into the outage).
        async def holder() -> bool:
            return any(
                t.status is TaskStatus.RUNNING and t.owner == "w-0" and kinds[t.task_id] != "unsent"
                for t in await tasks()
            )

        await _until("w-0 holds a running task", holder, 30, state)
        victim = fleet.workers["w-0"]
        victim.send_signal(signal.SIGKILL)
        await asyncio.to_thread(victim.wait, 30)
        held = {
            t.task_id: t.status for t in await tasks() if t.owner == "w-0" and not t.is_terminal
        }
        seen_before = len(fleet.log("w-1"))
        back = await _outage(cluster)
        await fleet.start("w-2")

        # 3. Within the bound: terminal, or visibly waiting for the unsent fact.
        def waiting(task: TaskSnapshot, alive: set[str]) -> bool:
            """Waiting for the unsent fact: in its slot of a live worker, or parked."""
            if task.status is TaskStatus.RUNNING:
                return task.owner in alive and any(
                    line.startswith(f"{task.task_id} s{WAIT_AT} ") for line in _ledger(ledger)
                )
            return _parked(task)

        async def settled() -> bool:
            alive = await live()
            return all(
                t.is_terminal or (kinds[t.task_id] == "unsent" and waiting(t, alive))
                for t in await tasks()
            )

        await _until("every task terminal or visibly waiting", settled, BOUND, state)
        settled_after = time.monotonic() - back
        finals = {t.task_id: t for t in await tasks()}
        alive = await live()
        steps = {t: await _patient(functools.partial(reader.steps, t)) for t in kinds}
        histories = {t: await _patient(functools.partial(reader.history, t)) for t in kinds}
        facts = {t: await _patient(functools.partial(reader.facts, t)) for t in kinds}
        rows = [row["op"] for row in await _admin(cluster.dsn, f"SELECT op FROM {TABLE}")]
        told = await state()
        await asyncio.to_thread((tmp_path / "final-state.txt").write_text, told)  # for a reader
        survivors = {"w-1": fleet.workers["w-1"], "w-2": fleet.workers["w-2"]}
        for worker in survivors.values():
            worker.send_signal(signal.SIGTERM)
        codes = {o: await asyncio.to_thread(w.wait, 30) for o, w in survivors.items()}

    assert cluster.crashes == 2
    assert settled_after < BOUND
    assert sorted(finals) == sorted(kinds)
    # Terminal or visibly waiting; nothing stranded.
    assert [(t, why) for t, task in finals.items() if (why := _stranded(task, alive))] == [], told
    succeeded = {t for t, task in finals.items() if task.status is TaskStatus.SUCCEEDED}
    cut_off = {t for t, task in finals.items() if _outage_failure(task)}
    waiting_ids = {t for t, kind in kinds.items() if kind == "unsent"} - cut_off
    assert cut_off == set(), told
    assert succeeded | cut_off | waiting_ids == set(kinds), told
    # The killed worker's tasks ran nowhere during the second outage: taken over by a
    # reconcile after it (a started one shows its lost attempt), they all succeeded.
    assert TaskStatus.RUNNING in held.values(), "w-0 ran no task when it was killed"
    assert {t for t in held if kinds[t] != "unsent"} <= succeeded, told
    for task_id, was in held.items():
        if was is TaskStatus.QUEUED:
            continue  # claimed, never started: given back to the queue, nothing lost
        lost = [tr for tr in histories[task_id] if tr.trigger == Trigger.LEASE_EXPIRED]
        assert lost, f"{task_id}, {was.value} on the killed w-0, shows no lost attempt"
        assert lost[-1].to_status is TaskStatus.RETRY_WAIT  # resumed, not ended lost
    for task_id in succeeded:
        final = finals[task_id]
        assert final.result == kinds[task_id]
        assert audit_history(final, histories[task_id]) == []
    for task_id in waiting_ids:
        final = finals[task_id]
        if final.status is TaskStatus.RUNNING:
            assert final.owner in alive, (task_id, final.owner)
        else:
            assert _parked(final), (task_id, final.status)
        names = [s.name for s in steps[task_id]]
        assert "fact:never:deadline" in names
        assert "fact:never" not in names  # nothing decided: still waiting
        assert facts[task_id] == []
    # Each operation committed at most one row; a finished one exactly one.
    assert [op for op, n in Counter(rows).items() if n > 1] == []
    for task_id in succeeded:
        assert {f"{task_id}:row", f"{task_id}:done"} <= set(rows)
    for task_id in waiting_ids:
        assert f"{task_id}:row" in rows
    # Each recorded step ran once in the attempt that recorded it, and never after.
    runs: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in _ledger(ledger):
        task_id, name, epoch, _pid = line.split()
        runs[task_id, name].append(int(epoch))
    for task_id, kind in kinds.items():
        recorded = [s for s in steps[task_id] if s.name.startswith("s") and ":" not in s.name]
        names = [s.name for s in recorded]
        wanted = WAIT_AT + 1 if kind == "unsent" else STEPS
        if task_id in cut_off:
            wanted = len(names)
        assert names == [f"s{n}" for n in range(wanted)], task_id
        for record in recorded:
            epochs = runs[task_id, record.name]
            assert Counter(epochs)[record.epoch] == 1, (task_id, record.name, epochs)
            assert max(epochs) == record.epoch, (task_id, record.name, epochs)
        ran = {name for t, name in runs if t == task_id}
        # A task cut off by the outage may have run its next step without recording it.
        assert ran - set(names) <= ({f"s{len(names)}"} if task_id in cut_off else set())
    # The workers survived both outages, saw them, and logged no traceback.
    assert codes == {"w-1": 0, "w-2": 0}
    for owner in fleet.workers:
        assert _tracebacks(fleet.log(owner)) == [], f"{owner} logged a traceback"
    after_kill = fleet.log("w-1")[seen_before:]
    assert "PostgreSQL is unreachable" in after_kill, "w-1 never saw the server go away"
    assert "periodic reconcile failed" in after_kill, "no reconcile of w-1 met the outage"


async def _told(store: PostgresTaskStore, task: TaskSnapshot) -> str:
    """One task as a failure message tells it: status, owner, failure, its last transitions."""
    history = await _patient(lambda: store.history(task.task_id))
    lines = [f"{task.task_id}: {task.status.value} owner={task.owner} failure={task.failure}"]
    lines += [
        f"    {t.from_status.value} -> {t.to_status.value} {t.trigger} {t.actor} {t.reason or ''}"
        for t in history[-8:]
    ]
    return "\n".join(lines)


def _ran(ledger: Path, count: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(await asyncio.to_thread(_ledger, ledger)) >= count

    return check
