"""The history auditor: does a snapshot agree with the history it claims?

Used after every fault test and by anyone who wants proof that no transition
went missing: the history must be a legal path with contiguous versions, and
the snapshot must equal its fold.
"""

from __future__ import annotations

from collections.abc import Sequence

from chongming.errors import InvalidTransition
from chongming.state.fold import fold_history
from chongming.state.records import TaskSnapshot, Transition

__all__ = ["audit_history"]


def audit_history(snapshot: TaskSnapshot, history: Sequence[Transition]) -> list[str]:
    """Return the problems found (an empty list means the record is sound)."""
    problems: list[str] = []
    for record in history:
        if record.task_id != snapshot.task_id:
            problems.append(f"transition v{record.version} belongs to {record.task_id!r}")
    try:
        folded = fold_history(history)
    except InvalidTransition as error:
        return [*problems, str(error)]
    if folded.status is not snapshot.status:
        problems.append(f"snapshot says {snapshot.status}, history ends at {folded.status}")
    if folded.status_version != snapshot.status_version:
        problems.append(
            f"snapshot version {snapshot.status_version}, history ends at {folded.status_version}"
        )
    if history and folded.attempt != snapshot.attempt:
        problems.append(f"snapshot attempt {snapshot.attempt}, history says {folded.attempt}")
    return problems
