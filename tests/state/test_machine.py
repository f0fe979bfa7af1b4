from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming import InvalidTransition, TaskSnapshot, TaskStatus
from chongming.state import apply_transition, audit_history

S = TaskStatus
T0 = datetime(2026, 10, 2, 14, 0, tzinfo=UTC)


def pending() -> TaskSnapshot:
    return TaskSnapshot(
        task_id="job-1",
        name="extract",
        label="extract",
        status=S.PENDING,
        status_version=0,
        attempt=0,
        max_attempts=1,
        created_at=T0,
        updated_at=T0,
    )


def test_a_trajectory_folds_back_to_its_snapshot() -> None:
    snapshot, history = pending(), []
    for i, target in enumerate((S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED), start=1):
        snapshot, transition = apply_transition(
            snapshot, target, trigger="test:step", at=T0 + timedelta(seconds=i)
        )
        history.append(transition)
    assert (snapshot.status, snapshot.status_version, snapshot.attempt) == (S.SUCCEEDED, 4, 1)
    assert snapshot.queued_at == T0 + timedelta(seconds=1)
    assert snapshot.started_at == T0 + timedelta(seconds=3)
    assert snapshot.finished_at == T0 + timedelta(seconds=4)
    assert audit_history(snapshot, history) == []


def test_an_illegal_move_changes_nothing() -> None:
    snapshot = pending()
    with pytest.raises(InvalidTransition):
        apply_transition(snapshot, S.RUNNING, trigger="test:step", at=T0)
    assert snapshot.status is S.PENDING
