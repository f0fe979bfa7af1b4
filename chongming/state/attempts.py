"""Which start begins a new attempt, and how a task's runs are counted apart.

``attempt`` counts attempts against ``RetryPolicy.max_attempts``, and only
them: it goes up when a task enters ``starting``, unless the task was
queued by a **park** (``runtime:parked``: a durable task gave its slot back
for a long sleep or fact wait) or a **resume** (``reconcile:resumed``: a
durable task whose worker died goes back to the queue), a **hand-back**
(``runtime:handed_back``: a closing worker gave its durable task back), or
by a worker that gave back a start its claim wrote but it never launched
(``runtime:start_given_back``). They continue the attempt they interrupted
(the replay picks it up where it stopped), so a task never shows an
attempt above its maximum, and a task that parked three times is still on
its first attempt. Resumes are bounded by ``max_resumes``
and counted from the history, as parks are (:func:`count_runs`).

Pure: no I/O, no clock. The stores' claims apply the same rule in SQL (the
trigger of the transition at the task's current version).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger

__all__ = ["CONTINUES_ATTEMPT", "RunCounts", "count_runs", "starts_attempt"]

#: Triggers of a ``-> queued`` whose next start continues the attempt it interrupted
#: (a start its claimer gave back without launching it was no attempt either).
CONTINUES_ATTEMPT = frozenset(
    {Trigger.PARKED, Trigger.RESUMED, Trigger.HANDED_BACK, Trigger.START_GIVEN_BACK}
)


def starts_attempt(queued_by: str | None) -> bool:
    """Whether a start of a task queued by ``queued_by`` (a trigger) begins a new attempt."""
    return queued_by not in CONTINUES_ATTEMPT


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunCounts:
    """A task's runs counted apart: attempts (the retry budget), resumes, parks."""

    attempts: int
    resumes: int
    parks: int


def count_runs(history: Iterable[Transition]) -> RunCounts:
    """Attempts, resumes and parks, read from a task's history."""
    attempts = resumes = parks = 0
    queued_by: str | None = None
    for transition in history:
        to = transition.to_status
        if to is TaskStatus.STARTING and starts_attempt(queued_by):
            attempts += 1
        elif to is TaskStatus.QUEUED:
            queued_by = transition.trigger
            if queued_by == Trigger.PARKED:
                parks += 1
            elif queued_by == Trigger.RESUMED:
                resumes += 1
    return RunCounts(attempts=attempts, resumes=resumes, parks=parks)
