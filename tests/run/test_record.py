"""``RunRecord.move`` and ``apply_transition`` are one rule, written twice for speed.

The live run keeps compact values on its hot path; stored snapshots move
through the pure function. Random legal walks through the table must leave
both in the same place, with the same history.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chongming.clock import to_datetime
from chongming.errors import InvalidTransition
from chongming.run.record import RunRecord, optional_datetime
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS

START = 1_790_000_000.0


@st.composite
def walks(draw: st.DrawFn) -> list[tuple[TaskStatus, str, str, str | None, float]]:
    status = TaskStatus.PENDING
    steps = []
    now = START
    for _ in range(draw(st.integers(0, 12))):
        targets = sorted(TRANSITIONS[status], key=lambda s: s.value)
        if not targets:
            break
        status = draw(st.sampled_from(targets))
        now += draw(st.floats(0, 10, allow_nan=False))
        trigger = draw(st.sampled_from(["user:stop", "scheduler:dispatch", "x:y"]))
        actor = draw(st.sampled_from(["system", "user", "ops"]))
        reason = draw(st.none() | st.text(max_size=5))
        steps.append((status, trigger, actor, reason, now))
    return steps


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(walks())
def test_record_and_apply_transition_agree(
    steps: list[tuple[TaskStatus, str, str, str | None, float]],
) -> None:
    record = RunRecord("t", START)
    snapshot = TaskSnapshot(
        task_id="t",
        name="n",
        label="n",
        status=TaskStatus.PENDING,
        status_version=0,
        attempt=0,
        max_attempts=1,
        created_at=to_datetime(START),
        updated_at=to_datetime(START),
    )
    expected = []
    for target, trigger, actor, reason, now in steps:
        record.move(target, trigger, now, actor, reason)
        snapshot, transition = apply_transition(
            snapshot, target, trigger=trigger, at=to_datetime(now), actor=actor, reason=reason
        )
        expected.append(transition)
    assert record.transitions() == expected
    assert (record.status, record.version, record.attempt) == (
        snapshot.status,
        snapshot.status_version,
        snapshot.attempt,
    )
    assert to_datetime(record.updated) == snapshot.updated_at
    assert optional_datetime(record.queued) == snapshot.queued_at
    assert optional_datetime(record.started) == snapshot.started_at
    assert optional_datetime(record.finished) == snapshot.finished_at


@pytest.mark.parametrize("current", list(TaskStatus))
def test_an_illegal_move_changes_nothing(current: TaskStatus) -> None:
    record = RunRecord("t", START)
    record.status = current
    before = dataclasses.astuple(_state(record))
    for target in TaskStatus:
        if target in TRANSITIONS[current]:
            continue
        with pytest.raises(InvalidTransition):
            record.move(target, "x:y", START + 1)
        assert dataclasses.astuple(_state(record)) == before


@dataclasses.dataclass(frozen=True)
class _State:
    status: TaskStatus
    version: int
    attempt: int
    history: tuple[object, ...]
    updated: float


def _state(record: RunRecord) -> _State:
    return _State(record.status, record.version, record.attempt, record.history, record.updated)
