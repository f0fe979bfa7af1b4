"""A node killed or frozen: every acknowledged transition survives, reconcile tells the truth.

Real processes on one SQLite file and on PostgreSQL (tests/control/node_main.py):

- SIGKILL at a random moment: every submit A acknowledged is in the store with
  a legal, contiguous history; a dry run of B's reconcile writes nothing; once
  A's lease has expired B marks A's in-flight tasks ``lost`` and reports the
  queued ones adoptable, within ``lease_ttl + 1 s`` of the kill.
- SIGSTOP past the lease: B reconciles A's tasks as ``lost``; A, continued,
  has every later state write rejected and lets those tasks go.

``make test`` runs a few kill points per store; ``make proofs`` runs 100
(``CHONGMING_KILL_POINTS`` sets any other count).
"""

from __future__ import annotations

import asyncio
import random
import signal

import pytest

from chongming import Controller, TaskSnapshot, TaskStatus
from chongming.state import audit_history
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from tests.control.support import Node, wait_stored
from tests.tiers import proof_size

S = TaskStatus
LEASE_TTL = 1.0
KILL_POINTS = proof_size("CHONGMING_KILL_POINTS", reduced=3, full=100)


async def read_acks(node: Node, deadline: float) -> tuple[list[str], bool]:
    """Ack lines read until the node printed ``ready`` or ``deadline`` passed."""
    acks: list[str] = []
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        try:
            line = await node.line(timeout=max(0.01, deadline - loop.time()))
        except TimeoutError:
            break
        if line == "ready":
            return acks, True
        if line.startswith("ack "):
            acks.append(line.removeprefix("ack "))
    return acks, False


async def quiet_view(ops: Controller, prefix: str) -> list[TaskSnapshot]:
    """The node's tasks once two reads 0.2 s apart agree."""
    before = None
    while True:
        now = [s for s in await ops.list_tasks() if s.task_id.startswith(prefix)]
        if now == before:
            return now
        before = now
        await asyncio.sleep(0.2)


async def kill_and_reconcile(args: list[str], store: TaskStore, run: int, seed: int) -> None:
    rng = random.Random(seed)
    prefix = f"r{run}-"
    node = Node(
        *args,
        "--owner",
        f"node-{run}",
        "--tasks",
        "6",
        "--max-parallel",
        "3",
        "--prefix",
        prefix,
        "--lease-ttl",
        str(LEASE_TTL),
    )
    loop = asyncio.get_running_loop()
    try:
        # Kill somewhere between "still submitting" and "running for a while".
        wait = rng.uniform(0.0, 1.5)
        acks, ready = await read_acks(node, loop.time() + wait)
        if ready:
            await asyncio.sleep(rng.uniform(0.0, 0.3))
        node.process.send_signal(signal.SIGKILL)
        killed_at = loop.time()
        stdout = node.process.stdout
        rest = await asyncio.to_thread(stdout.read) if stdout is not None else ""
    finally:
        node.kill()
    acks += [line.removeprefix("ack ") for line in rest.splitlines() if line.startswith("ack ")]
    async with Controller(store=store, owner=f"ops-{run}") as ops:
        # A PostgreSQL backend may still commit the dead node's last statement
        # after the client is gone: read once the store has stopped moving.
        mine = await quiet_view(ops, prefix)
        by_id = {s.task_id: s for s in mine}
        for task_id in acks:  # P1: every acknowledged submit survived the kill
            assert task_id in by_id, f"acknowledged {task_id} is not in the store"
        for snapshot in mine:  # P2: each history is a legal, contiguous path
            history = await ops.history(snapshot.task_id)
            problems = audit_history(snapshot, history)
            assert problems == [], (snapshot, [(t.version, t.to_status, t.at) for t in history])
        dry = await ops.reconcile(dry_run=True)
        after_dry = {s.task_id: s for s in await ops.list_tasks() if s.task_id.startswith(prefix)}
        assert after_dry == by_id, "a dry run wrote something"
        # Once the lease has expired (store clock), the verdicts are final.
        while True:
            report = await ops.reconcile(reason="node died")
            ours = [e for e in report.entries if e.task_id.startswith(prefix)]
            if not any(e.outcome == "untouched" for e in ours):
                break
            assert loop.time() - killed_at < LEASE_TTL + 5, "the lease never expired"
            await asyncio.sleep(0.05)
        judged = loop.time() - killed_at
        assert judged <= LEASE_TTL + 1.0 + 1.0, f"judged {judged:.2f}s after the kill"
        lost = {e.task_id for e in ours if e.outcome == "lost"}
        adoptable = {e.task_id for e in ours if e.outcome == "adoptable"}
        for task_id, snapshot in by_id.items():
            if snapshot.status.holds_carrier:
                assert task_id in lost
                stored = await ops.get(task_id)
                assert stored.status is S.LOST
                last = (await ops.history(task_id))[-1]
                assert (last.trigger, last.reason) == (Trigger.LEASE_EXPIRED, "node died")
            elif not snapshot.is_terminal:
                assert task_id in adoptable
                assert (await ops.get(task_id)).status is snapshot.status  # unchanged
        assert {e.task_id for e in dry.lost if e.task_id.startswith(prefix)} <= lost | {
            task_id for task_id, s in by_id.items() if s.status.holds_carrier
        }
        assert not any(
            s.status.holds_carrier for s in await ops.list_tasks() if s.task_id.startswith(prefix)
        ), "a task was left active with a carrier"


@pytest.mark.proof
async def test_sigkill_at_random_points(shared: tuple[list[str], TaskStore]) -> None:
    args, store = shared
    for run in range(KILL_POINTS):
        await kill_and_reconcile(args, store, run, seed=1000 + run)


async def test_a_node_frozen_past_its_lease_has_its_stale_writes_rejected(
    shared: tuple[list[str], TaskStore],
) -> None:
    args, store = shared
    node = Node(
        *args,
        "--owner",
        "frozen",
        "--tasks",
        "3",
        "--finish-after",
        "1.5",
        "--lease-ttl",
        str(LEASE_TTL),
    )
    try:
        for _ in range(4):
            await node.line()  # three acks and "ready"
        node.process.send_signal(signal.SIGSTOP)
        async with Controller(store=store, owner="ops") as ops:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + LEASE_TTL + 5
            while True:
                report = await ops.reconcile(reason="frozen node")
                if len(report.lost) == 3:
                    break
                assert loop.time() < deadline, report
                await asyncio.sleep(0.05)
            node.process.send_signal(signal.SIGCONT)
            result = await node.finish()
            # Every task A finished after it came back was refused by the store.
            assert result["let_go"] == ["job-0", "job-1", "job-2"]
            for task_id in ("job-0", "job-1", "job-2"):
                stored = await wait_stored(store, task_id, S.LOST)
                history = await ops.history(task_id)
                assert history[-1].trigger == Trigger.LEASE_EXPIRED
                assert audit_history(stored, history) == []
    finally:
        if node.process.poll() is None:
            node.process.send_signal(signal.SIGCONT)
        node.kill()
