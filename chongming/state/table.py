"""The transition table: the one place that says which moves are legal."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from types import MappingProxyType

from chongming.errors import InvalidTransition
from chongming.state.status import TaskStatus

__all__ = ["TRANSITIONS", "check_transition", "is_allowed", "shortest_path"]

_S = TaskStatus

TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = MappingProxyType(
    {
        _S.PENDING: frozenset({_S.QUEUED, _S.BLOCKED, _S.STOPPED, _S.CANCELLED}),
        _S.BLOCKED: frozenset({_S.QUEUED, _S.SKIPPED, _S.CANCELLED, _S.STOPPED}),
        _S.QUEUED: frozenset({_S.STARTING, _S.STOPPED, _S.CANCELLED, _S.FAILED}),
        _S.STARTING: frozenset({_S.RUNNING, _S.FAILED, _S.RETRY_WAIT, _S.STOPPING, _S.LOST}),
        _S.RUNNING: frozenset(
            {_S.SUCCEEDED, _S.FAILED, _S.RETRY_WAIT, _S.PAUSING, _S.STOPPING, _S.LOST}
        ),
        _S.PAUSING: frozenset(
            {
                _S.PAUSED,
                _S.RUNNING,
                _S.STOPPING,
                _S.SUCCEEDED,
                _S.FAILED,
                _S.RETRY_WAIT,
                _S.LOST,
            }
        ),
        _S.PAUSED: frozenset({_S.RUNNING, _S.STOPPING, _S.LOST}),
        _S.RETRY_WAIT: frozenset({_S.QUEUED, _S.STOPPED, _S.CANCELLED}),
        _S.STOPPING: frozenset({_S.STOPPED, _S.LOST, _S.SUCCEEDED, _S.FAILED}),
        _S.SUCCEEDED: frozenset(),
        _S.FAILED: frozenset(),
        _S.STOPPED: frozenset(),
        _S.CANCELLED: frozenset(),
        _S.SKIPPED: frozenset(),
        _S.LOST: frozenset(),
    }
)


def is_allowed(current: TaskStatus, target: TaskStatus) -> bool:
    return target in TRANSITIONS[current]


def check_transition(current: TaskStatus, target: TaskStatus) -> None:
    """Raise :class:`InvalidTransition` unless the table allows the move."""
    if target not in TRANSITIONS[current]:
        raise InvalidTransition(current, target)


def shortest_path(start: TaskStatus, goal: TaskStatus) -> list[TaskStatus]:
    """The shortest legal path through the table (``[start]`` if there is none)."""
    paths: deque[list[TaskStatus]] = deque([[start]])
    seen = {start}
    while paths:
        path = paths.popleft()
        if path[-1] is goal:
            return path
        for step in sorted(TRANSITIONS[path[-1]], key=lambda s: s.value):
            if step not in seen:
                seen.add(step)
                paths.append([*path, step])
    return [start]
