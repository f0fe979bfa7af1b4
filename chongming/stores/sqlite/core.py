"""The SQLite store's core: snapshots, the write-through batch, history, touch, counts.

Writes go through the group-commit writer (one transaction per batch);
reads through the reader connection. A trusted write (``StateWrite.trusted``)
is encoded with the trusted row encoders and not checked again.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from chongming.errors import DuplicateTaskId, StoreClosed, StoreError, TaskNotFound, VersionConflict
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.state.status import ACTIVE_STATUSES
from chongming.stores.base import count_key
from chongming.stores.checks import check_made, check_transitions
from chongming.stores.codec import STATUS_OF, encode_progress
from chongming.stores.nodes import TaskCount
from chongming.stores.ports.core import CoreStore
from chongming.stores.sqlite import rows as r
from chongming.stores.sqlite.batch import (
    PATCH_TASK,
    UPDATE_TASK,
    AppendOp,
    CreateOp,
    SaveOp,
    TouchOp,
    WriteOp,
)
from chongming.stores.sqlite.internals import SqliteInternals
from chongming.stores.writes import WRITTEN, StateWrite, WriteOutcome, WriteResult

__all__ = ["CoreOnSqlite"]

_TASK_SELECT = f"SELECT {', '.join(r.TASK_NAMES)} FROM tasks"
_ACTIVE = ", ".join(f"'{status.value}'" for status in sorted(ACTIVE_STATUSES))
_COUNTS = "SELECT status, bucket, owner, count(*) FROM tasks"
_COUNTS_GROUP = " GROUP BY status, bucket, owner"
_groups = itertools.count(1)


class CoreOnSqlite(SqliteInternals, CoreStore):
    """The SQLite store's core: snapshots, the write-through batch, history, touch, counts."""

    def _create_op(
        self, snapshot: TaskSnapshot, transitions: Sequence[Transition], trusted: bool = False
    ) -> CreateOp:
        if trusted:  # made and checked by the runtime (see StateWrite.trusted)
            check_made(snapshot)
            row = r.trusted_insert_row(snapshot, self._limit, None)
        else:
            row = r.encode(r.insert_row, snapshot, self._limit)
            check_transitions(transitions, snapshot.task_id)
        return CreateOp(
            future=self._future(),
            task_id=snapshot.task_id,
            version=snapshot.status_version,
            row=row,
            transitions=[r.transition_row(t) for t in transitions],
        )

    def _save_op(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition],
        trusted: bool = False,
    ) -> SaveOp:
        # Encoded once, here; only the mutable columns when the stored identity is known.
        patch = self._identities.holds(snapshot, expect_version)
        if trusted:  # made and checked by the runtime (see StateWrite.trusted)
            encoder = r.trusted_patch_row if patch else r.trusted_full_update_row
            row = encoder(snapshot, self._limit, expect_version)
        else:
            encoder = r.patch_row if patch else r.full_update_row
            row = r.encode(encoder, snapshot, self._limit, expect_version)
            check_transitions(transitions, snapshot.task_id)
        return SaveOp(
            future=self._future(),
            task_id=snapshot.task_id,
            expect_version=expect_version,
            new_version=snapshot.status_version,
            sql=PATCH_TASK if patch else UPDATE_TASK,
            row=row,
            transitions=[r.transition_row(t) for t in transitions],
        )

    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        await self._written(self._create_op(snapshot, transitions), snapshot, None)

    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        op = self._save_op(snapshot, expect_version, transitions)
        await self._written(op, snapshot, expect_version)

    async def _written(self, op: WriteOp, snapshot: TaskSnapshot, expect: int | None) -> None:
        """Write ``op``; remember the identity only of a write known to have committed."""
        try:
            await self._write(op)
        except BaseException:
            self._identities.forget(snapshot.task_id)
            raise
        self._identities.remember(snapshot, expect)

    async def get(self, task_id: str) -> TaskSnapshot | None:
        for row in await self._read(f"{_TASK_SELECT} WHERE task_id = ?", (task_id,)):
            return r.snapshot_from_row(row)
        return None

    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        where: list[str] = []
        params: list[Any] = []
        if query.statuses is not None:
            where.append("status IN (SELECT value FROM json_each(?))")
            params.append(r.dump(sorted(s.value for s in query.statuses)))
        if query.tag is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(tasks.tags) AS t WHERE t.value = ?)")
            params.append(query.tag)
        if query.bucket is not None:
            where.append("bucket = ?")
            params.append(query.bucket)
        if query.buckets is not None:
            where.append("bucket IN (SELECT value FROM json_each(?))")
            params.append(r.dump(sorted(query.buckets)))
        if query.name is not None:
            where.append("name = ?")
            params.append(query.name)
        if query.owner is not None:
            where.append("owner = ?")
            params.append(query.owner)
        sql = _TASK_SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, task_id"
        if query.limit is not None:
            sql += " LIMIT ?"
            params.append(query.limit)
        return [r.snapshot_from_row(row) for row in await self._read(sql, params)]

    async def append(self, transitions: Sequence[Transition]) -> None:
        check_transitions(transitions)
        future = self._future()
        if not transitions:
            future.cancel()
            return
        await self._write(
            AppendOp(future=future, transitions=[r.transition_row(t) for t in transitions])
        )

    async def history(self, task_id: str) -> list[Transition]:
        rows = await self._read(
            f"SELECT {', '.join(r.TRANSITION_COLUMNS)} FROM transitions"
            " WHERE task_id = ? ORDER BY version",
            (task_id,),
        )
        return [r.transition_from_row(row) for row in rows]

    async def histories(self, task_ids: Collection[str]) -> dict[str, list[Transition]]:
        found: dict[str, list[Transition]] = {task_id: [] for task_id in task_ids}
        rows = await self._read(
            f"SELECT {', '.join(r.TRANSITION_COLUMNS)} FROM transitions"
            " WHERE task_id IN (SELECT value FROM json_each(?)) ORDER BY task_id, version",
            (r.dump(sorted(found)),),
        )
        for row in rows:
            transition = r.transition_from_row(row)
            found[transition.task_id].append(transition)
        return found

    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
        owner: str | None = None,
    ) -> None:
        op = TouchOp(
            future=self._future(),
            task_id=task_id,
            progress=encode_progress(progress, self._limit),
            heartbeat=None if heartbeat is None else r.to_micros(heartbeat, "heartbeat"),
            owner=owner,
        )
        await self._write(op)

    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        sql = _COUNTS
        if active_only:
            sql += f" WHERE status IN ({_ACTIVE})"
        counts = [
            TaskCount(status=STATUS_OF[row[0]], bucket=row[1], owner=row[2], count=row[3])
            for row in await self._read(sql + _COUNTS_GROUP)
        ]
        counts.sort(key=count_key)
        return counts

    async def apply_writes(self, writes: Sequence[StateWrite]) -> list[WriteResult]:
        """The whole batch in one transaction of the group-commit writer.

        Every write is encoded and checked first (a :class:`PayloadError`
        raises before anything is queued; a trusted write is encoded, not
        checked again: see :attr:`StateWrite.trusted`). Each write still gets its own
        outcome: the batch plan decides conflicts, duplicates and missing
        tasks per write against the stored versions, so a loser never fails
        its neighbours. Busy, full or unavailable rolls the whole transaction
        back: every write is then ``FAILED`` (not written). A write whose
        outcome is unknown (the store closed while it was in flight) is
        re-read; a re-sent write already stored is ``WRITTEN``.
        """
        if not writes:
            if self._closed:
                raise StoreClosed(repr(self))
            return []
        ops: list[WriteOp] = []
        for write in writes:
            if write.expect_version is None:
                ops.append(self._create_op(write.snapshot, write.transitions, write.trusted))
            else:
                ops.append(
                    self._save_op(
                        write.snapshot, write.expect_version, write.transitions, write.trusted
                    )
                )
        if self._writer is None:
            await self.open()
        writer = self._writer
        if writer is None or self._closed:
            raise StoreClosed(repr(self))
        writer.submit_group(ops, next(_groups))
        results: list[WriteResult] = []
        for write, op in zip(writes, ops, strict=True):
            results.append(await self._outcome(write, op))
        return results

    async def _outcome(self, write: StateWrite, op: WriteOp) -> WriteResult:
        snapshot = write.snapshot
        try:
            await op.future
        except VersionConflict as conflict:
            self._identities.forget(snapshot.task_id)
            return await self._resent(write, conflict.actual, _CONFLICT)
        except DuplicateTaskId:
            self._identities.forget(snapshot.task_id)
            return await self._resent(write, snapshot.status_version, _DUPLICATE)
        except TaskNotFound:
            self._identities.forget(snapshot.task_id)
            return _NOT_FOUND
        except StoreError as error:
            self._identities.forget(snapshot.task_id)
            if type(error) is StoreError and self._closed:
                raise StoreClosed(repr(self)) from None  # in flight at close: cannot re-read
            return WriteResult(outcome=WriteOutcome.FAILED, error=error)
        except BaseException:
            self._identities.forget(snapshot.task_id)
            raise
        self._identities.remember(snapshot, write.expect_version)
        return _WRITTEN


_WRITTEN = WRITTEN
_CONFLICT = WriteResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = WriteResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = WriteResult(outcome=WriteOutcome.NOT_FOUND)
