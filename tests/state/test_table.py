from __future__ import annotations

import itertools

import pytest

from chongming.errors import InvalidTransition
from chongming.state import TERMINAL_STATUSES, TRANSITIONS, TaskStatus, check_transition, is_allowed

# DESIGN §3 written out independently of the implementation, as strings.
EXPECTED = {
    "pending": {"queued", "blocked", "stopped", "cancelled"},
    "blocked": {"queued", "skipped", "cancelled", "stopped"},
    "queued": {"starting", "stopped", "cancelled", "failed"},
    "starting": {"running", "failed", "retry_wait", "stopping", "lost"},
    "running": {"succeeded", "failed", "retry_wait", "pausing", "stopping", "lost"},
    "pausing": {"paused", "running", "stopping", "succeeded", "failed", "retry_wait", "lost"},
    "paused": {"running", "stopping", "lost"},
    "retry_wait": {"queued", "stopped", "cancelled"},
    "stopping": {"stopped", "lost", "succeeded", "failed"},
    "succeeded": set(),
    "failed": set(),
    "stopped": set(),
    "cancelled": set(),
    "skipped": set(),
    "lost": set(),
}

PAIRS = list(itertools.product(TaskStatus, TaskStatus))


def test_fifteen_states_six_terminal() -> None:
    assert len(TaskStatus) == 15
    assert {s.value for s in TERMINAL_STATUSES} == {
        "succeeded",
        "failed",
        "stopped",
        "cancelled",
        "skipped",
        "lost",
    }
    assert set(TRANSITIONS) == set(TaskStatus)


@pytest.mark.parametrize(("current", "target"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_every_pair(current: TaskStatus, target: TaskStatus) -> None:
    allowed = target.value in EXPECTED[current.value]
    assert is_allowed(current, target) is allowed
    if allowed:
        check_transition(current, target)
    else:
        with pytest.raises(InvalidTransition) as caught:
            check_transition(current, target)
        assert caught.value.current is current
        assert caught.value.target is target
        assert f"{current.value} -> {target.value}" in str(caught.value)


def test_terminal_states_absorb() -> None:
    for status in TERMINAL_STATUSES:
        assert status.is_terminal
        assert TRANSITIONS[status] == frozenset()
