"""``RunRecord``: a run's status, version and history — the one writer of them.

Every status change of a live run goes through :meth:`RunRecord.move`: check
the transition table, bump ``status_version`` by exactly one, append one
history step, stamp the timestamps. It applies the same rule as the pure
:func:`chongming.state.machine.apply_transition` for stored snapshots; a
property test folds random walks through both and requires equal results.

The hot path keeps compact values: history steps are tuples of atomic values
(invisible to the garbage collector once seen), times are float epoch
seconds; frozen ``Transition`` records and datetimes are built when read.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from chongming.clock import to_datetime
from chongming.errors import InvalidTransition
from chongming.run.history import STATUS_VALUE, Step, extend_records
from chongming.run.statuses import PENDING, QUEUED, RUNNING, STARTING
from chongming.state.attempts import CONTINUES_ATTEMPT
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS

__all__ = ["RunRecord", "optional_datetime"]

_TERMINAL = frozenset(s for s in TaskStatus if s.is_terminal)
_ALLOWED = dict(TRANSITIONS)  # a plain dict reads faster than the public read-only view


class RunRecord:
    """Status, version, attempt number, timestamps and history of one run."""

    __slots__ = (
        "_records",
        "attempt",
        "created",
        "finished",
        "history",
        "queued",
        "started",
        "status",
        "task_id",
        "updated",
        "version",
    )

    def __init__(self, task_id: str, now: float) -> None:
        self.task_id = task_id
        self.status = PENDING
        self.version = 0
        self.attempt = 0
        self.history: tuple[Step, ...] = ()
        self._records: list[Transition] | None = None
        self.created = now
        self.updated = now
        self.queued: float | None = None
        self.started: float | None = None
        self.finished: float | None = None

    def restore(self, snapshot: TaskSnapshot, history: Sequence[Transition]) -> None:
        """Take over a task the store already holds (a claimed, enqueued task).

        ``history`` is the stored one, complete from version 1, so a write of
        the next version follows it exactly; it must end at the snapshot's
        version, or the claim raced a writer and the task is not ours to run.
        """
        if [t.version for t in history] != list(range(1, snapshot.status_version + 1)):
            raise ValueError(
                f"the stored history of {snapshot.task_id!r} does not lead to version "
                f"{snapshot.status_version}"
            )
        self.status = snapshot.status
        self.version = snapshot.status_version
        self.attempt = snapshot.attempt
        self.history = tuple(
            (
                t.version,
                STATUS_VALUE[t.from_status],
                STATUS_VALUE[t.to_status],
                t.at.timestamp(),
                t.trigger,
                t.actor,
                t.reason,
                t.attempt,
            )
            for t in history
        )
        self._records = list(history)  # as stored: later transitions extend it
        self.created = snapshot.created_at.timestamp()
        self.updated = snapshot.updated_at.timestamp()
        self.queued = None if snapshot.queued_at is None else snapshot.queued_at.timestamp()
        self.started = None if snapshot.started_at is None else snapshot.started_at.timestamp()
        self.finished = None

    @property
    def is_terminal(self) -> bool:
        return self.status in _TERMINAL

    def move(
        self,
        target: TaskStatus,
        trigger: str,
        now: float,
        actor: str = "system",
        reason: str | None = None,
    ) -> TaskStatus:
        """Apply ``status -> target``; return the previous status.

        Entering ``starting`` begins a new attempt, unless a park or a resume
        queued the task (it continues the attempt they interrupted; see
        :mod:`chongming.state.attempts`). Raises :class:`InvalidTransition`
        (changing nothing) when the table forbids it.
        """
        current = self.status
        if target not in _ALLOWED[current]:
            raise InvalidTransition(current, target)
        version = self.version + 1
        self.version = version
        if target is STARTING:
            history = self.history
            if not history or history[-1][4] not in CONTINUES_ATTEMPT:
                self.attempt += 1
        self.history += (
            (
                version,
                STATUS_VALUE[current],
                STATUS_VALUE[target],
                now,
                trigger,
                actor,
                reason,
                self.attempt,
            ),
        )
        self.status = target
        self.updated = now
        if target is QUEUED:
            if self.queued is None:
                self.queued = now
        elif target is RUNNING:
            if self.started is None:
                self.started = now
        elif target in _TERMINAL:
            self.finished = now
        return current

    def transitions(self) -> list[Transition]:
        """The history as records, oldest first (built once, extended as it grows)."""
        records = self._records
        if records is None:
            records = self._records = []
        extend_records(self.task_id, self.history, records)
        return records

    def last_transition(self) -> Transition:
        return self.transitions()[-1]


def optional_datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else to_datetime(seconds)
