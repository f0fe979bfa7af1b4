from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from chongming.errors import InvalidTransition
from chongming.state import HistoryGap, TaskStatus, Transition, fold_history

S = TaskStatus
AT = datetime(2026, 10, 2, 14, 1, 23, tzinfo=UTC)


def chain(*statuses: TaskStatus) -> list[Transition]:
    return [
        Transition(task_id="t", version=i, from_status=a, to_status=b, at=AT, trigger="test:step")
        for i, (a, b) in enumerate(itertools.pairwise(statuses), start=1)
    ]


def test_fold_follows_a_legal_path() -> None:
    folded = fold_history(chain(S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED))
    assert (folded.status, folded.status_version) == (S.SUCCEEDED, 4)


def test_fold_of_nothing_is_pending() -> None:
    assert fold_history([]).status is S.PENDING


def test_gap_in_versions_is_detected() -> None:
    history = chain(S.PENDING, S.QUEUED, S.STARTING)
    with pytest.raises(HistoryGap):
        fold_history([history[0], history[0]])
    with pytest.raises(HistoryGap):
        fold_history(history[1:])


def test_illegal_step_is_detected() -> None:
    with pytest.raises(InvalidTransition):
        fold_history(chain(S.PENDING, S.RUNNING))


def test_broken_chain_is_detected() -> None:
    first, second = chain(S.PENDING, S.QUEUED, S.STARTING)
    bad = Transition(
        task_id="t", version=2, from_status=S.PENDING, to_status=S.QUEUED, at=AT, trigger="x"
    )
    with pytest.raises(InvalidTransition):
        fold_history([first, bad])
    assert fold_history([first, second]).status is S.STARTING
