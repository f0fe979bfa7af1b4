"""The pure reconcile decision: leases decide, heartbeats never do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming.plane.reconcile import ReconcileOutcome, lost_write, plan_reconcile
from chongming.state.records import FailureKind, TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.nodes import NodeInfo, NodeRecord

S = TaskStatus
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def snapshot(
    task_id: str,
    status: TaskStatus,
    owner: str | None,
    bucket: int | None = 0,
    heartbeat: datetime | None = None,
) -> TaskSnapshot:
    return TaskSnapshot(
        task_id=task_id,
        name="n",
        label="n",
        status=status,
        status_version=3,
        attempt=1,
        max_attempts=1,
        created_at=NOW,
        updated_at=NOW,
        owner=owner,
        bucket=bucket,
        last_heartbeat_at=heartbeat,
    )


def node(owner: str, live: bool) -> NodeRecord:
    info = NodeInfo(owner=owner, incarnation="i", host="h", pid=1, version="v", num_buckets=64)
    expires = NOW + (timedelta(seconds=30) if live else -timedelta(seconds=5))
    return NodeRecord(
        info=info, started_at=NOW, renewed_at=NOW, lease_expires_at=expires, live=live
    )


@pytest.mark.parametrize("status", sorted(TaskStatus, key=str))
def test_each_status_under_a_dead_owner(status: TaskStatus) -> None:
    entries = plan_reconcile(
        [snapshot("t", status, "a")], {"a": node("a", False)}, owned_buckets=None
    )
    if status.is_terminal:
        assert entries == []
        return
    (entry,) = entries
    expected = ReconcileOutcome.LOST if status.holds_carrier else ReconcileOutcome.ADOPTABLE
    assert entry.outcome is expected
    assert entry.was is status


def test_a_live_owner_is_untouched_however_old_its_heartbeat() -> None:
    ancient = NOW - timedelta(days=3)
    (entry,) = plan_reconcile(
        [snapshot("t", S.RUNNING, "a", heartbeat=ancient)],
        {"a": node("a", True)},
        owned_buckets=None,
    )
    assert entry.outcome is ReconcileOutcome.UNTOUCHED


def test_an_owner_without_a_node_row_has_no_lease() -> None:
    (entry,) = plan_reconcile([snapshot("t", S.RUNNING, "ghost")], {}, owned_buckets=None)
    assert entry.outcome is ReconcileOutcome.LOST
    assert "no node lease" in entry.detail


def test_only_owned_buckets_are_judged() -> None:
    tasks = [
        snapshot("in", S.RUNNING, "a", 1),
        snapshot("out", S.RUNNING, "a", 2),
        snapshot("none", S.RUNNING, "a", None),
    ]
    entries = plan_reconcile(tasks, {}, owned_buckets=frozenset({1}))
    assert sorted(e.task_id for e in entries) == ["in", "none"]


def test_the_lost_write_is_one_legal_audited_step() -> None:
    before = snapshot("t", S.PAUSED, "a")
    after, transition = lost_write(
        before, at=NOW, actor="reconcile:b", reason=None, detail="owner 'a' gone"
    )
    assert (after.status, after.status_version) == (S.LOST, 4)
    assert transition.trigger == Trigger.LEASE_EXPIRED
    assert (transition.from_status, transition.actor) == (S.PAUSED, "reconcile:b")
    assert after.failure is not None
    assert after.failure.kind is FailureKind.LOST
    assert after.finished_at == NOW


def test_an_owner_named_gone_is_judged_dead_whatever_its_lease_says() -> None:
    """A node that took over its own name's lease judges what the gone process held."""
    tasks = [snapshot("run", S.RUNNING, "w"), snapshot("other", S.RUNNING, "x")]
    nodes = {"w": node("w", True), "x": node("x", True)}
    entries = plan_reconcile(
        tasks, nodes, owned_buckets=None, gone={"w": "its process is gone; lease taken over"}
    )
    by_id = {entry.task_id: entry for entry in entries}
    assert by_id["run"].outcome is ReconcileOutcome.LOST
    assert by_id["run"].detail == "its process is gone; lease taken over; outcome unknown"
    assert by_id["other"].outcome is ReconcileOutcome.UNTOUCHED  # only the named owner
