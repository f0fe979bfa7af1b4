"""Enqueuer processes and three ``chongming worker`` processes on one store, at load.

Run on a SQLite file and on PostgreSQL. What is counted is real: each task
appends its id and the pid that ran it to a ledger (one ``O_APPEND`` write per
execution), each enqueuer process notes every enqueue once it has returned,
and each worker notes every claim it made (``tests/cli/load_tasks.py``).

**The claim check.** The store's rule is: a claim takes, among the tasks
claimable at that moment, the ``limit`` best by ``(priority DESC, queued_at,
task_id)``; on PostgreSQL ``SKIP LOCKED`` passes over rows another claim has
locked, on SQLite no other claim can run at the same time. So for every claim
``B`` (sent at ``t0``, returned at ``t1``) and every task ``X`` whose enqueue
had returned before ``t0`` (committed, so visible to ``B``) and whose own
claim was sent after ``t1`` (so nobody held it while ``B`` ran): ``X`` was
claimable all through ``B``, hence

- if ``B`` took fewer than its limit, it should have taken ``X``: a violation;
- otherwise ``X`` must rank after every task ``B`` took.

Both are exactly true under the rule (no timing slack needed: the windows
only ever leave a pair out, never accuse a correct store), and either fails on
a store that claims out of order (FIFO within a priority included), returns a
short claim while work waits, or skips a committed row.
``test_claim_check_catches_out_of_order_claims`` feeds the check invented
histories that break the rule. A claim made while no such task waited binds
nothing, so each test also says how many claims the rule bound: under load
(tasks enqueued while the workers drain) nearly all of them on this machine,
and with a backlog in place before the workers start all but each worker's
last, by construction.

Exactly once is counted three ways: each task id appears in one claim, one
ledger line, and its stored snapshot is ``succeeded``, owned by the worker
whose process claimed it and ran it.

``CHONGMING_QUEUE_LOAD_TASKS`` sets how many tasks the load test enqueues
(2,000 in ``make test``; ``make proofs`` runs the pass mark's 20,000).
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest

from chongming import Controller, TaskStatus
from chongming.state.query import TaskQuery
from chongming.stores.base import TaskStore
from tests.cli.load_tasks import CLAIM_LOG
from tests.cli.test_processes import _Lines
from tests.cli.test_worker_process import DEADLINE, ROOT, _client_store, plane
from tests.tiers import proof_size

__all__ = ["plane"]

TASKS = proof_size("CHONGMING_QUEUE_LOAD_TASKS", reduced=2000, full=20_000)
ENQUEUERS = 4
WORKERS = 3
BACKLOG = 600
_NEVER = 2**63


@dataclasses.dataclass(frozen=True, slots=True)
class Enqueued:
    """One enqueue as its process saw it return (``done``: monotonic ns)."""

    task_id: str
    priority: int
    queued_at: int  # microseconds, as stored
    done: int

    @property
    def rank(self) -> tuple[int, int, str]:
        """The store's claim order: higher priority, then first queued, then id."""
        return (-self.priority, self.queued_at, self.task_id)


@dataclasses.dataclass(frozen=True, slots=True)
class Claim:
    """One claim call of one worker (``sent``, ``returned``: monotonic ns)."""

    pid: int
    sent: int
    returned: int
    limit: int
    taken: tuple[str, ...]


def claim_violations(
    enqueued: Sequence[Enqueued], claims: Sequence[Claim]
) -> tuple[list[str], int]:
    """Claims that broke the store's claim rule (module docstring), and how many it bound.

    A sweep: tasks enter as their enqueue returned before a claim was sent; a
    min-Fenwick tree over the tasks in decreasing order of their own claim's
    ``sent`` answers "the best task still unclaimed after ``returned``".
    """
    claimed_at = {task_id: c.sent for c in claims for task_id in c.taken}
    by_rank = sorted(enqueued, key=lambda e: e.rank)
    rank_of = {e.task_id: index for index, e in enumerate(by_rank)}
    later_first = sorted(enqueued, key=lambda e: -claimed_at.get(e.task_id, _NEVER))
    position = {e.task_id: index for index, e in enumerate(later_first)}
    later = [-claimed_at.get(e.task_id, _NEVER) for e in later_first]  # non-decreasing
    size = len(later_first)
    tree = [len(by_rank)] * (size + 1)  # len(by_rank): "no task"

    def insert(index: int, rank: int) -> None:
        index += 1
        while index <= size:
            tree[index] = min(tree[index], rank)
            index += index & -index

    def best_of_first(count: int) -> int:
        best = len(by_rank)
        while count > 0:
            best = min(best, tree[count])
            count -= count & -count
        return best

    arrivals = sorted(enqueued, key=lambda e: e.done)
    arrived = 0
    violations: list[str] = []
    bound = 0
    for claim in sorted(claims, key=lambda c: c.sent):
        while arrived < len(arrivals) and arrivals[arrived].done < claim.sent:
            task = arrivals[arrived]
            insert(position[task.task_id], rank_of[task.task_id])
            arrived += 1
        # tasks whose own claim was sent after this one returned: keys > returned
        waiting = bisect.bisect_left(later, -claim.returned)
        best = best_of_first(waiting)
        if best == len(by_rank):
            continue
        bound += 1
        waiter = by_rank[best]
        if len(claim.taken) < claim.limit:
            violations.append(
                f"claim by pid {claim.pid} took {len(claim.taken)} of {claim.limit}"
                f" while {waiter.task_id} (priority {waiter.priority}) waited"
            )
            continue
        worst = max(rank_of[task_id] for task_id in claim.taken)
        if best < worst:
            taken = by_rank[worst]
            violations.append(
                f"claim by pid {claim.pid} took {taken.task_id} (priority {taken.priority})"
                f" while {waiter.task_id} (priority {waiter.priority}) waited"
            )
    return violations, bound


def _worker(options: list[str], owner: str, logs: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    env[CLAIM_LOG] = str(logs)
    command = ["worker", "--tasks", "tests.cli.load_tasks", "--max-parallel", "8"]
    with (logs / f"{owner}.stderr").open("wb") as stderr:  # a pipe nobody reads could fill
        return subprocess.Popen(
            [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
            cwd=ROOT,
            env=env,
        )


def _enqueuer(
    where: object, logs: Path, ledger: Path, prefix: str, count: int, seed: int
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    if isinstance(where, Path):
        store = ["--db", str(where)]
    else:
        assert isinstance(where, tuple)
        store = ["--dsn", str(where[0]), "--schema", str(where[1])]
    out = logs / f"enqueued-{prefix}.txt"
    args = [str(out), str(ledger), prefix, str(count), str(seed), *store]
    with (logs / f"{prefix}.stderr").open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.cli.load_enqueuer", *args],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=ROOT,
            env=env,
        )


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=DEADLINE)
    if process.stdout is not None:
        process.stdout.close()


async def _exit_code(process: subprocess.Popen[bytes], timeout: float) -> int:
    return await asyncio.to_thread(process.wait, timeout)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What the processes of one run noted (read after every one of them exited)."""

    enqueued: list[Enqueued]
    claims: list[Claim]
    owners: dict[int, str]  # worker pid -> owner
    runs: Counter[str]  # task id -> executions in the ledger
    states: dict[str, tuple[TaskStatus, str | None, int, int | None]]  # and the pid that ran it


def _read_enqueued(logs: Path) -> list[Enqueued]:
    found = []
    for path in sorted(logs.glob("enqueued-*.txt")):
        for line in path.read_text().splitlines():
            task_id, priority, queued_at, done = line.split()
            found.append(Enqueued(task_id, int(priority), int(queued_at), int(done)))
    return found


def _read_claims(logs: Path) -> list[Claim]:
    found = []
    for path in sorted(logs.glob("claims-*.txt")):
        pid = int(path.stem.removeprefix("claims-"))
        for line in path.read_text().splitlines():
            kind, sent, returned, limit, *rest = line.split(" ")
            assert kind == "claim", f"worker {pid}: {line}"
            taken = tuple(rest[0].split(",")) if rest and rest[0] else ()
            found.append(Claim(pid, int(sent), int(returned), int(limit), taken))
    return found


async def _drained(store: TaskStore, count: int, timeout: float) -> None:
    """Until ``count`` tasks exist and none is active (polled: the workers are elsewhere)."""
    deadline = time.monotonic() + timeout
    while True:
        counts = await store.task_counts()
        total = sum(c.count for c in counts)
        active = sum(c.count for c in await store.task_counts(active_only=True))
        if total == count and active == 0:
            return
        assert time.monotonic() < deadline, f"not drained: {total} tasks, {active} active"
        await asyncio.sleep(0.2)


async def _run(
    plane: tuple[list[str], object],
    logs: Path,
    *,
    shares: list[int],
    before_workers: bool,
) -> Outcome:
    """Enqueuers and workers on one store; what every process noted, once all have exited."""
    options, where = plane
    ledger = logs / "ledger.txt"
    total = sum(shares)
    workers: list[subprocess.Popen[bytes]] = []
    enqueuers: list[subprocess.Popen[bytes]] = []
    client = Controller(store=_client_store(where), owner="checker")
    try:

        async def start_workers() -> None:
            workers.extend(_worker(options, f"w-{n}", logs) for n in range(WORKERS))
            for worker in workers:
                line = await asyncio.to_thread(_Lines(worker).next)
                assert line.startswith("worker w-"), line

        async def enqueue() -> None:
            enqueuers.extend(
                _enqueuer(where, logs, ledger, f"e{n}", share, seed=n)
                for n, share in enumerate(shares)
            )
            codes = [await _exit_code(e, DEADLINE + total / 50) for e in enqueuers]
            errors = [(logs / f"e{n}.stderr").read_text() for n in range(len(shares))]
            assert codes == [0] * len(shares), errors

        # One process creates the schema before the others open it concurrently.
        if before_workers:
            await client.start()
            await enqueue()
            await start_workers()
        else:
            await start_workers()
            await client.start()
            await enqueue()
        store = client.store
        assert store is not None
        await _drained(store, total, DEADLINE + total / 40)
        finals = {t.task_id: t for t in await store.query(TaskQuery(name="mark"))}
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        codes = [await _exit_code(w, DEADLINE) for w in workers]
        assert codes == [0] * WORKERS
    finally:
        await client.close(close_store=True)
        for process in [*workers, *enqueuers]:
            _end(process)
    owners = {worker.pid: f"w-{n}" for n, worker in enumerate(workers)}
    runs: Counter[str] = Counter()
    ran_in: dict[str, int] = {}
    for line in ledger.read_text().splitlines():
        task_id, pid = line.split()
        runs[task_id] += 1
        ran_in[task_id] = int(pid)
    states = {
        task_id: (final.status, final.owner, final.priority, ran_in.get(task_id))
        for task_id, final in finals.items()
    }
    return Outcome(_read_enqueued(logs), _read_claims(logs), owners, runs, states)


def _assert_exactly_once(outcome: Outcome, total: int) -> None:
    enqueued, claims, owners = outcome.enqueued, outcome.claims, outcome.owners
    runs = outcome.runs
    ids = {e.task_id for e in enqueued}
    assert len(enqueued) == len(ids) == total  # every enqueue returned, once
    assert set(runs) == ids  # 0 missing (and nothing ran that was not enqueued)
    assert [key for key, count in runs.items() if count != 1] == []  # 0 duplicates
    took = Counter(task_id for claim in claims for task_id in claim.taken)
    assert set(took) == ids  # each claimed...
    assert set(took.values()) == {1}  # ...exactly once
    claimer = {task_id: claim.pid for claim in claims for task_id in claim.taken}
    priority = {e.task_id: e.priority for e in enqueued}
    expected = {
        task_id: (
            TaskStatus.SUCCEEDED,
            owners[claimer[task_id]],
            priority[task_id],
            claimer[task_id],
        )
        for task_id in ids
    }
    assert outcome.states == expected  # succeeded, owned by and run in the process that claimed it


def _assert_claims_best_first(enqueued: list[Enqueued], claims: list[Claim]) -> None:
    rank = {e.task_id: e.rank for e in enqueued}
    for claim in claims:
        assert [rank[t] for t in claim.taken] == sorted(rank[t] for t in claim.taken)


@pytest.mark.slow
@pytest.mark.timeout(180 + TASKS // 40)
@pytest.mark.proof
async def test_enqueuer_processes_and_three_workers_run_every_task_exactly_once(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    """The issue's first proof: enqueued by several processes while three workers drain."""
    shares = [TASKS // ENQUEUERS + (n < TASKS % ENQUEUERS) for n in range(ENQUEUERS)]
    outcome = await _run(plane, tmp_path, shares=shares, before_workers=False)
    _assert_exactly_once(outcome, TASKS)
    _assert_claims_best_first(outcome.enqueued, outcome.claims)
    violations, bound = claim_violations(outcome.enqueued, outcome.claims)
    assert violations == []
    taking = [c for c in outcome.claims if c.taken]
    assert bound > 0, "no claim was made while a task waited: the check proved nothing"
    last_enqueue = max(e.done for e in outcome.enqueued)
    during = sum(len(c.taken) for c in taking if c.returned < last_enqueue)
    assert during > 0  # drained while the enqueuers were still enqueueing
    assert {c.pid for c in taking} == set(outcome.owners)  # all three took a share
    first_enqueue = min(e.done for e in outcome.enqueued)
    last_claim = max(c.returned for c in taking)
    print(  # shown with -s: what the proof covered
        f"{TASKS} tasks, {len(taking)} claims took work, {bound} bound by the rule,"
        f" {during} claimed before the last enqueue returned;"
        f" enqueued in {(last_enqueue - first_enqueue) / 1e9:.1f} s,"
        f" all claimed {(last_claim - first_enqueue) / 1e9:.1f} s after the first enqueue"
    )


@pytest.mark.slow
async def test_a_backlog_is_claimed_best_first_by_every_worker(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    """Every task waits before the workers start, so the rule binds nearly every claim.

    Stated directly: each worker's claims, in the order it made them, take
    tasks in claim order (its claims put end to end are sorted by rank), and
    a claim that returned before another was sent took only better tasks.
    Only a worker's last claim may have nothing left after it to be judged by.
    """
    shares = [BACKLOG // 2, BACKLOG - BACKLOG // 2]
    outcome = await _run(plane, tmp_path, shares=shares, before_workers=True)
    _assert_exactly_once(outcome, BACKLOG)
    _assert_claims_best_first(outcome.enqueued, outcome.claims)
    violations, bound = claim_violations(outcome.enqueued, outcome.claims)
    assert violations == []
    taking = sorted((c for c in outcome.claims if c.taken), key=lambda c: c.sent)
    assert bound >= len(taking) - WORKERS
    rank = {e.task_id: e.rank for e in outcome.enqueued}
    per_worker: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for claim in taking:
        per_worker[claim.pid].extend(rank[t] for t in claim.taken)
    for pid, ranks in per_worker.items():
        assert ranks == sorted(ranks), f"worker {outcome.owners[pid]} claimed out of order"
    for earlier in taking:
        for later in taking:
            if earlier.returned < later.sent:
                assert max(rank[t] for t in earlier.taken) < min(rank[t] for t in later.taken)


def _history(*tasks: tuple[str, int, int]) -> list[Enqueued]:
    """Tasks ``(id, priority, enqueue returned at)``, queued in the order given."""
    return [
        Enqueued(task_id, p, queued_at=n, done=done) for n, (task_id, p, done) in enumerate(tasks)
    ]


def test_claim_check_catches_out_of_order_claims() -> None:
    """The check accuses a claim that skipped a better waiting task, or came back short."""
    tasks = _history(("a", 1, 10), ("b", 5, 20), ("c", 3, 30))
    fair = [
        Claim(1, 100, 110, 1, ("b",)),
        Claim(2, 120, 130, 1, ("c",)),
        Claim(1, 140, 150, 1, ("a",)),
    ]
    assert claim_violations(tasks, fair) == ([], 2)
    skipped = [Claim(1, 100, 110, 1, ("a",)), Claim(2, 120, 130, 2, ("b", "c"))]
    violations, _ = claim_violations(tasks, skipped)
    assert violations == ["claim by pid 1 took a (priority 1) while b (priority 5) waited"]
    short = [Claim(1, 100, 110, 2, ("b",)), Claim(2, 120, 130, 2, ("c", "a"))]
    violations, _ = claim_violations(tasks, short)
    assert violations == ["claim by pid 1 took 1 of 2 while c (priority 3) waited"]
    # A task enqueued after the claim was sent, or claimed by a claim that overlapped
    # it (another worker, under SKIP LOCKED), is no evidence: nothing is accused.
    late = [Claim(1, 15, 25, 1, ("a",)), Claim(2, 24, 40, 1, ("b",)), Claim(1, 50, 60, 1, ("c",))]
    assert claim_violations(tasks, late)[0] == []
    # FIFO within a priority is part of the rule too.
    same = _history(("x", 2, 10), ("y", 2, 20))
    assert claim_violations(same, [Claim(1, 30, 40, 1, ("y",)), Claim(1, 50, 60, 1, ("x",))])[0]


def test_claim_check_agrees_with_the_rule_read_literally() -> None:
    """The sweep finds what checking every (claim, task) pair by hand finds."""
    rng = random.Random(13)
    accused = 0
    for _ in range(200):
        tasks = _history(*((f"t{n}", rng.randint(0, 3), rng.randint(0, 100)) for n in range(12)))
        order = [t.task_id for t in tasks]
        rng.shuffle(order)
        claims, clock = [], 0
        while order:
            clock += rng.randint(1, 20)
            count = rng.randint(0, 3)
            taken, order = tuple(order[:count]), order[count:]
            returned = clock + rng.randint(0, 15)
            claims.append(Claim(rng.randint(1, 3), clock, returned, rng.randint(1, 3), taken))
        claimed_at = {t: c.sent for c in claims for t in c.taken}
        rank = {t.task_id: t.rank for t in tasks}
        expected, bound = 0, 0
        for claim in claims:
            waiting = [
                t.task_id
                for t in tasks
                if t.done < claim.sent and claimed_at[t.task_id] > claim.returned
            ]
            if not waiting:
                continue
            bound += 1
            if len(claim.taken) < claim.limit or min(rank[t] for t in waiting) < max(
                rank[t] for t in claim.taken
            ):
                expected += 1
        violations, found = claim_violations(tasks, claims)
        assert (len(violations), found) == (expected, bound)
        accused += expected
    assert accused > 100  # the invented histories do break the rule, often
