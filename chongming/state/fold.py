"""Rebuild the state of a task from its history.

The snapshot a store holds must always equal this fold; tests and the history
auditor use it to prove that no transition went missing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from chongming.errors import InvalidTransition
from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.state.table import check_transition

__all__ = ["FoldedState", "HistoryGap", "fold_history"]


class HistoryGap(InvalidTransition):
    """The history skips or repeats a version, or does not chain its states."""

    def __init__(self, task_id: str, expected: int, got: int) -> None:
        self.task_id = task_id
        self.expected = expected
        self.got = got
        Exception.__init__(self, f"history of {task_id!r}: expected version {expected}, got {got}")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FoldedState:
    status: TaskStatus
    status_version: int
    attempt: int


def fold_history(
    transitions: Iterable[Transition], *, initial: TaskStatus = TaskStatus.PENDING
) -> FoldedState:
    """Check that ``transitions`` form a legal path and return where it ends."""
    status = initial
    version = 0
    attempt = 0
    for record in transitions:
        if record.version != version + 1:
            raise HistoryGap(record.task_id, version + 1, record.version)
        if record.from_status is not status:
            raise InvalidTransition(status, record.to_status)
        check_transition(status, record.to_status)
        status = record.to_status
        version = record.version
        attempt = record.attempt
    return FoldedState(status=status, status_version=version, attempt=attempt)
