"""The PostgreSQL store's core: snapshots, the write-through batch, history, touch.

Each write is a :class:`~chongming.stores.postgres.writer.WriteArgs` with a
``resolve`` that re-reads its outcome after a connection error (P6: a
committed write is never reported as failed); writes go through group
commit when it is on. The SQL text is :mod:`chongming.stores.postgres.sql`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from chongming.errors import (
    ConfigurationError,
    DuplicateTaskId,
    StoreClosed,
    StoreError,
    TaskNotFound,
    VersionConflict,
)
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.stores.checks import check_time
from chongming.stores.ports.core import CoreStore
from chongming.stores.postgres import rows
from chongming.stores.postgres.connections import same_write
from chongming.stores.postgres.driver import is_connection_error, translate
from chongming.stores.postgres.pool import PostgresPlumbing
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS
from chongming.stores.postgres.writer import WriteArgs, WriteResult
from chongming.stores.writes import WRITTEN, StateWrite, WriteOutcome
from chongming.stores.writes import WriteResult as StateResult

__all__ = ["CoreMethods"]


class CoreMethods(PostgresPlumbing, CoreStore):
    """The store port's core methods, for :class:`PostgresTaskStore`."""

    def _create_args(
        self, snapshot: TaskSnapshot, transitions: Sequence[Transition]
    ) -> tuple[WriteArgs, Callable[[], Awaitable[WriteResult | None]]]:
        args = WriteArgs(
            mode="create",
            key=snapshot.task_id,
            params=rows.encode(rows.full_params, snapshot, self._limit),
            transitions=rows.transition_rows(transitions, snapshot.task_id),
        )

        async def resolve() -> WriteResult | None:
            stored = await self.get(snapshot.task_id)
            if stored is None:
                return None
            ours = same_write(stored, snapshot) and await self._has(transitions)
            return WriteResult(applied=ours, current=stored.status_version)

        return args, resolve

    def _save_args(
        self, snapshot: TaskSnapshot, expect_version: int, transitions: Sequence[Transition]
    ) -> tuple[WriteArgs, Callable[[], Awaitable[WriteResult | None]]]:
        # Encoded once, here; only the mutable columns when the stored identity is known.
        patch = self._identities.holds(snapshot, expect_version)
        args = WriteArgs(
            mode="patch" if patch else "save",
            key=snapshot.task_id,
            expect=int(expect_version),
            params=rows.encode(
                rows.patch_params if patch else rows.full_params, snapshot, self._limit
            ),
            transitions=rows.transition_rows(transitions, snapshot.task_id),
        )

        async def resolve() -> WriteResult | None:
            stored = await self.get(snapshot.task_id)
            if stored is None:
                return WriteResult(applied=False, current=None)
            if same_write(stored, snapshot) and await self._has(transitions):
                return WriteResult(applied=True, current=expect_version)
            if stored.status_version == expect_version:
                return None  # not committed: run it again
            return WriteResult(applied=False, current=stored.status_version)

        return args, resolve

    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        args, resolve = self._create_args(snapshot, transitions)
        result = await self._written(f"creating task {snapshot.task_id!r}", args, resolve)
        if not result.applied:
            raise DuplicateTaskId(snapshot.task_id)
        self._identities.remember(snapshot)

    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        args, resolve = self._save_args(snapshot, expect_version, transitions)
        what = f"saving task {snapshot.task_id!r}"
        result = await self._written(what, args, resolve)
        if result.applied:
            self._identities.remember(snapshot, expect_version)
            return
        self._identities.forget(snapshot.task_id)
        actual = await self._actual(what, snapshot.task_id, expect_version, result.current)
        if actual is None:
            raise TaskNotFound(snapshot.task_id)
        raise VersionConflict(snapshot.task_id, expect_version, actual)

    async def _actual(
        self, what: str, task_id: str, expect: int, current: int | None
    ) -> int | None:
        """The stored version that beat a save (re-read when it lost inside one statement)."""
        if current == expect:
            # Lost a race inside one statement: the row changed after its snapshot.
            found: int | None = await self._read(
                what, lambda conn: conn.fetchval(self._sql.version, task_id)
            )
            return found
        return current

    async def apply_writes(self, writes: Sequence[StateWrite]) -> list[StateResult]:
        """Every write through group commit at once: few statements, one outcome each.

        All writes are encoded and checked first (:class:`PayloadError` raises
        before anything is sent). They are queued together, so they share the
        writers' next batches (each batch one set-based statement in one
        transaction, with any concurrent caller's writes); without group
        commit, each round of the batch is one statement. A conflict never
        raises inside the statement, so a loser never fails its neighbours.
        A write that met a connection error is re-read (P6): committed means
        ``WRITTEN``; when even the re-read fails, ``FAILED`` carries an error
        that says the outcome is unknown, and re-sending the same write is
        safe (a re-sent write already stored is ``WRITTEN``).
        """
        self._check_open()
        prepared = [
            self._create_args(w.snapshot, w.transitions)
            if w.expect_version is None
            else self._save_args(w.snapshot, w.expect_version, w.transitions)
            for w in writes
        ]
        if not writes:
            return []
        await self.open()
        if self.read_only:
            error = StoreError(f"writing tasks: this role may only read schema {self._schema!r}")
            return [StateResult(outcome=WriteOutcome.FAILED, error=error) for _ in writes]
        raw: list[WriteResult | BaseException] = []
        if self._writer is not None:
            for future in self._writer.enqueue([args for args, _ in prepared]):
                try:
                    raw.append(await future)
                except Exception as error:
                    raw.append(error)
        else:
            try:
                raw.extend(await self._execute_writes([args for args, _ in prepared]))
            except Exception as error:
                raw.extend([error] * len(prepared))
        results = []
        for write, (args, resolve), answer in zip(writes, prepared, raw, strict=True):
            results.append(await self._outcome(write, args, resolve, answer))
        return results

    async def _outcome(
        self,
        write: StateWrite,
        args: WriteArgs,
        resolve: Callable[[], Awaitable[WriteResult | None]],
        answer: WriteResult | BaseException,
    ) -> StateResult:
        snapshot = write.snapshot
        what = f"writing task {snapshot.task_id!r}"
        if isinstance(answer, BaseException):
            if isinstance(answer, StoreClosed):
                raise StoreClosed("PostgresTaskStore") from None
            if isinstance(answer, StoreError | ConfigurationError) or not is_connection_error(
                answer
            ):
                self._identities.forget(snapshot.task_id)
                error = (
                    answer
                    if isinstance(answer, StoreError)
                    else translate(answer, what, self._scrub)
                )
                return StateResult(outcome=WriteOutcome.FAILED, error=error)
            try:  # the outcome is unknown: re-read first, then (not written) run it again
                answer = await self._written(what, args, resolve, resolve_first=True)
            except StoreClosed:
                raise
            except StoreError as error:
                return StateResult(outcome=WriteOutcome.FAILED, error=error)
        if answer.applied:
            self._identities.remember(snapshot, write.expect_version)
            return _WRITTEN
        self._identities.forget(snapshot.task_id)
        if write.expect_version is None:
            return await self._resent(write, snapshot.status_version, _DUPLICATE)
        try:
            actual = await self._actual(
                what, snapshot.task_id, write.expect_version, answer.current
            )
        except StoreError as error:
            return StateResult(outcome=WriteOutcome.FAILED, error=error)
        if actual is None:
            return _NOT_FOUND
        return await self._resent(write, actual, _CONFLICT)

    async def get(self, task_id: str) -> TaskSnapshot | None:
        row = await self._read(
            f"reading task {task_id!r}", lambda conn: conn.fetchrow(self._sql.get, task_id)
        )
        return None if row is None else rows.snapshot_from_row(row)

    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        sql, args = self._sql.query(query)
        found = await self._read("querying tasks", lambda conn: conn.fetch(sql, *args))
        return [rows.snapshot_from_row(row) for row in found]

    async def append(self, transitions: Sequence[Transition]) -> None:
        if not transitions:
            self._check_open()
            return
        args = WriteArgs(
            mode="append",
            key=transitions[0].task_id,
            params=[None] * len(SNAPSHOT_COLUMNS),
            transitions=rows.transition_rows(transitions),
        )

        async def resolve() -> WriteResult | None:
            return None  # idempotent: just run it again

        await self._write("appending transitions", args, resolve)

    async def history(self, task_id: str) -> list[Transition]:
        found = await self._read(
            f"reading the history of {task_id!r}",
            lambda conn: conn.fetch(self._sql.history, task_id),
        )
        return [rows.transition_from_row(row) for row in found]

    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
        owner: str | None = None,
    ) -> None:
        if progress is None and heartbeat is None:
            self._check_open()
            return
        params: list[Any] = [None] * len(SNAPSHOT_COLUMNS)
        params[0] = task_id
        params[rows.COLUMN_INDEX["owner"]] = owner  # NULL: whoever owns it
        params[rows.COLUMN_INDEX["progress"]] = rows.progress_param(progress, self._limit)
        if heartbeat is not None:
            params[rows.COLUMN_INDEX["last_heartbeat_at"]] = check_time(heartbeat, "heartbeat")
        args = WriteArgs(mode="touch", key=task_id, params=params)

        async def resolve() -> WriteResult | None:
            return None  # idempotent: just run it again

        await self._write(f"touching task {task_id!r}", args, resolve)

    async def _has(self, transitions: Sequence[Transition]) -> bool:
        """True when every transition is stored exactly as given."""
        by_task: dict[str, list[Transition]] = {}
        for record in transitions:
            by_task.setdefault(record.task_id, []).append(record)
        for task_id, records in by_task.items():
            versions = [record.version for record in records]
            found = await self._read(
                "re-reading transitions", self._fetch_versions(task_id, versions)
            )
            stored = {row["version"]: rows.transition_from_row(row) for row in found}
            if any(stored.get(record.version) != record for record in records):
                return False
        return True

    def _fetch_versions(self, task_id: str, versions: list[int]) -> Callable[[Any], Awaitable[Any]]:
        return lambda conn: conn.fetch(self._sql.history_versions, task_id, versions)


_CONFLICT = StateResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = StateResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = StateResult(outcome=WriteOutcome.NOT_FOUND)
_WRITTEN = WRITTEN
