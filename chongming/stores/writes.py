"""A batch of state writes and what became of each: the write-through path.

A controller with a store turns the transitions of many tasks into one list
of :class:`StateWrite` and hands it to :meth:`TaskStore.apply_writes`. Each
write is atomic on its own (snapshot and history rows together, a
compare-and-set on the version for an update); writes of different tasks are
independent, so one conflict never fails its neighbours. Backends may commit
the whole batch in one transaction; the default applies them one by one.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

from chongming.state.records import TaskSnapshot, Transition

__all__ = ["WRITTEN", "StateWrite", "WriteOutcome", "WriteResult"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StateWrite:
    """Create a task (``expect_version is None``) or move a stored one forward.

    ``trusted``: the runtime made these records and checked them where it
    made them, once (task id, label, tags and reasons at submit; arguments
    and the result in their JSON form within the controller's payload limit;
    failure texts made storable; times aware). The write-through marks its
    writes so; a store then writes them without checking them again. Any
    other write (the default) gets every check of ``create`` and ``save``:
    a bad record raises :class:`~chongming.errors.PayloadError` and nothing
    of the batch is written.
    """

    snapshot: TaskSnapshot
    transitions: Sequence[Transition]
    expect_version: int | None = None
    trusted: bool = False


class WriteOutcome(enum.StrEnum):
    WRITTEN = "written"
    CONFLICT = "conflict"  # the stored version was not the expected one
    DUPLICATE = "duplicate"  # create of an id the store already holds
    NOT_FOUND = "not_found"  # update of an id the store does not hold
    FAILED = "failed"  # the store could not be reached or refused: retry later


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WriteResult:
    outcome: WriteOutcome
    error: BaseException | None = None  # for FAILED: what the store raised


#: The result of a write that committed. Backends answer with this one
#: instance, so the write-through can tell the common case by identity.
WRITTEN = WriteResult(outcome=WriteOutcome.WRITTEN)
