"""The run's ``_move`` and ``apply_transition`` are one rule, written twice for speed.

The live run keeps compact values on its hot path; stored snapshots move
through the pure function. Random legal walks through the table must leave
both in the same place, with the same history.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chongming.clock import to_datetime
from chongming.errors import InvalidTransition
from chongming.run.task_run import TaskRun
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS

START = 1_790_000_000.0


def optional_datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else to_datetime(seconds)


class _Clock:
    """A clock the test sets before each move."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


async def _work(ctx: object) -> None:
    return None


def _run(clock: _Clock) -> TaskRun:
    return TaskRun(_work, task_id="t", name="n", clock=clock)


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
        # runtime:parked queues a task whose next start continues its attempt.
        trigger = draw(
            st.sampled_from(["user:stop", "scheduler:dispatch", "x:y", "runtime:parked"])
        )
        actor = draw(st.sampled_from(["system", "user", "ops"]))
        reason = draw(st.none() | st.text(max_size=5))
        steps.append((status, trigger, actor, reason, now))
    return steps


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(walks())
def test_record_and_apply_transition_agree(
    steps: list[tuple[TaskStatus, str, str, str | None, float]],
) -> None:
    async def fold() -> None:
        clock = _Clock(START)
        run = _run(clock)
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
        queued_by = None  # the trigger of the latest transition (what queued a start)
        for target, trigger, actor, reason, now in steps:
            clock.now = now
            run._move(target, trigger, actor=actor, reason=reason)
            snapshot, transition = apply_transition(
                snapshot,
                target,
                trigger=trigger,
                at=to_datetime(now),
                actor=actor,
                reason=reason,
                queued_by=queued_by,
            )
            queued_by = trigger
            expected.append(transition)
        assert list(run.transitions) == expected
        assert (run.status, run.status_version, run.attempt) == (
            snapshot.status,
            snapshot.status_version,
            snapshot.attempt,
        )
        mine = run.snapshot
        assert mine.created_at == snapshot.created_at
        assert to_datetime(run._updated_at) == mine.updated_at == snapshot.updated_at
        assert optional_datetime(run._queued_at) == mine.queued_at == snapshot.queued_at
        assert optional_datetime(run._started_at) == mine.started_at == snapshot.started_at
        assert optional_datetime(run._finished_at) == mine.finished_at == snapshot.finished_at
        assert run.done is snapshot.status.is_terminal

    asyncio.run(fold())


@pytest.mark.parametrize("current", list(TaskStatus))
async def test_an_illegal_move_changes_nothing(current: TaskStatus) -> None:
    run = _run(_Clock(START))
    run.status = current
    before = dataclasses.astuple(_state(run))
    for target in TaskStatus:
        if target in TRANSITIONS[current]:
            continue
        with pytest.raises(InvalidTransition):
            run._move(target, "x:y")
        assert dataclasses.astuple(_state(run)) == before


@dataclasses.dataclass(frozen=True)
class _State:
    status: TaskStatus
    version: int
    attempt: int
    history: tuple[object, ...]
    updated: float
    counts: tuple[int, ...]


def _state(run: TaskRun) -> _State:
    return _State(
        run.status,
        run.status_version,
        run.attempt,
        tuple(run._history),
        run._updated_at,
        tuple(run.host.per_status.values()),
    )
