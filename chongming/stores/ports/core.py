"""The core of the store port: snapshots, history, the hot path, counts.

Every store has it. Snapshots are compare-and-set on ``status_version``
(a stale writer gets :class:`VersionConflict`); history is append-only,
idempotent per ``(task_id, version)`` and read in version order; ``touch``
(progress, heartbeat) never bumps the version nor conflicts with a state
write. ``apply_writes`` is the write-through's batch (see
:mod:`chongming.stores.writes` for the trusted path).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Collection, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

from chongming.errors import (
    DuplicateTaskId,
    PayloadError,
    StoreClosed,
    StoreError,
    TaskNotFound,
    VersionConflict,
)
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.stores.nodes import TaskCount
from chongming.stores.writes import WRITTEN, StateWrite, WriteOutcome, WriteResult

if TYPE_CHECKING:  # these import stores.checks, which needs the records above
    pass

__all__ = ["CoreStore", "count_key", "is_stored"]


class CoreStore(Protocol):
    """Async persistence of tasks: what every store implements (see the module docstring)."""

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Connect and migrate; called implicitly by the first operation."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release every connection. Idempotent; later calls raise StoreClosed."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- snapshots -----------------------------------------------------------

    @abc.abstractmethod
    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """Insert a new task (and its first transitions) atomically.

        Raises :class:`DuplicateTaskId` when the id exists; nothing is written then.
        """

    @abc.abstractmethod
    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        """Replace the snapshot if the stored ``status_version`` equals ``expect_version``.

        ``transitions`` are appended in the same transaction (the combined path
        the state machine uses). Raises :class:`VersionConflict` on a stale
        version and :class:`TaskNotFound` for an unknown id; nothing is
        written in either case. Lease columns are never written.
        """

    @abc.abstractmethod
    async def get(self, task_id: str) -> TaskSnapshot | None:
        """The stored snapshot, or ``None``."""

    @abc.abstractmethod
    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        """Snapshots matching ``query``, ordered by ``created_at`` then ``task_id``."""

    async def apply_writes(self, writes: Sequence[StateWrite]) -> list[WriteResult]:
        """Apply independent state writes; one result per write, in order.

        Each write is atomic (``create`` when ``expect_version`` is None, else
        ``save``). A conflict, a duplicate or a missing task is that write's
        outcome, never its neighbours'. ``FAILED`` means *not written*: a
        write whose outcome the store could not tell is re-read first, and a
        write re-sent after such a failure whose effect is already stored
        (the same snapshot at the new version, its transitions in the history)
        is reported ``WRITTEN``, never ``CONFLICT`` or ``DUPLICATE``.
        :class:`StoreClosed` and :class:`PayloadError` (a bug of the caller:
        records are checked before they get here) are raised. This default
        applies the writes one by one; the built-in backends override it to
        commit a batch at once.

        A write marked :attr:`~StateWrite.trusted` (the write-through marks
        its own) holds records the runtime made and checked where it made
        them: a backend may write it without checking it again. Every other
        write gets every check :meth:`create` and :meth:`save` make. This
        default checks every write.

        Cancellation: writes already handed to the backend may still commit;
        the caller re-reads (or re-sends, which is safe) to find out.
        """
        results: list[WriteResult] = []
        for write in writes:
            try:
                if write.expect_version is None:
                    await self.create(write.snapshot, write.transitions)
                else:
                    await self.save(write.snapshot, write.expect_version, write.transitions)
            except (StoreClosed, PayloadError):
                raise
            except VersionConflict as conflict:
                results.append(await self._resent(write, conflict.actual, _CONFLICT))
            except DuplicateTaskId:
                results.append(await self._resent(write, write.snapshot.status_version, _DUPLICATE))
            except TaskNotFound:
                results.append(_NOT_FOUND)
            except StoreError as error:
                results.append(WriteResult(outcome=WriteOutcome.FAILED, error=error))
            else:
                results.append(_WRITTEN)
        return results

    async def _resent(
        self, write: StateWrite, current: int | None, lost: WriteResult
    ) -> WriteResult:
        """``WRITTEN`` when ``write`` is already stored (a re-send), else ``lost``."""
        if current != write.snapshot.status_version:
            return lost
        try:
            if await is_stored(self, write):
                return _WRITTEN
        except StoreClosed:
            raise
        except StoreError:
            pass  # cannot tell: the loser's outcome stands (nothing of this call was written)
        return lost

    # -- history -------------------------------------------------------------

    @abc.abstractmethod
    async def append(self, transitions: Sequence[Transition]) -> None:
        """Append transitions; an existing ``(task_id, version)`` is left as it is."""

    @abc.abstractmethod
    async def history(self, task_id: str) -> list[Transition]:
        """All transitions of a task in version order (empty for an unknown id)."""

    async def histories(self, task_ids: Collection[str]) -> dict[str, list[Transition]]:
        """:meth:`history` of several tasks at once (a worker adopting a claim).

        Every id is a key (an empty list for an unknown one). This default
        reads them one by one; the built-in stores answer in one query.
        """
        return {task_id: await self.history(task_id) for task_id in task_ids}

    # -- hot path ------------------------------------------------------------

    @abc.abstractmethod
    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
        owner: str | None = None,
    ) -> None:
        """Record progress and/or a heartbeat. Never changes ``status_version``.

        An unknown id is ignored: the hot path must not fail a task. With
        ``owner``, only while the task's owner is that node: an attempt whose
        task was taken over elsewhere (a zombie) writes nothing, the same
        fencing its steps get from the epoch.
        """

    # -- what the CLI and reports read ----------------------------------------

    @abc.abstractmethod
    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        """Task counts grouped by (status, bucket, owner), sorted by :func:`count_key`.

        ``active_only``: only unfinished tasks (statuses in ``ACTIVE_STATUSES``).
        """


def count_key(count: TaskCount) -> tuple[str, bool, int, bool, str]:
    """The order of :meth:`TaskStore.task_counts`: status, then bucket and owner, ``None`` first."""
    return (
        count.status.value,
        count.bucket is not None,
        count.bucket or 0,
        count.owner is not None,
        count.owner or "",
    )


async def is_stored(store: CoreStore, write: StateWrite) -> bool:
    """Does ``store`` hold exactly what ``write`` writes (a re-read after an unknown outcome)?

    The snapshot is compared in its stored form, except the hot-path fields
    (progress, heartbeat) that ``touch`` may have changed since; every
    transition of the write must be in the history as given.
    """
    from chongming.stores.stored import as_stored, utc_transition

    stored = await store.get(write.snapshot.task_id)
    if stored is None:
        return False
    ours = as_stored(write.snapshot, None)
    if (
        dataclasses.replace(
            stored, progress=ours.progress, last_heartbeat_at=ours.last_heartbeat_at
        )
        != ours
    ):
        return False
    if not write.transitions:
        return True
    history = {t.version: t for t in await store.history(write.snapshot.task_id)}
    return all(history.get(t.version) == utc_transition(t) for t in write.transitions)


_WRITTEN = WRITTEN
_CONFLICT = WriteResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = WriteResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = WriteResult(outcome=WriteOutcome.NOT_FOUND)
