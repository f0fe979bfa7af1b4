"""``PostgresTaskStore``: the TaskStore port on asyncpg.

Shared across processes and machines. The store clock (node leases, command
claims) is the server's ``clock_timestamp()``, never the caller's (not
``now()``: that is the transaction's start, stale for a statement that waited
on a row lock).

Failure handling (docs/reliability.md, P6): a connection error is retried for reads
(bounded, with a short backoff: after a server restart the first pooled
query fails and the next succeed). A write that met a connection error has
an unknown outcome, so it is re-read first: if it committed, the call
returns normally; if not, it runs again. A committed write is never reported
as failed; when even the re-read is impossible, the call raises
:class:`StoreUnavailable` saying the outcome is unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from chongming.errors import (
    ConfigurationError,
    DuplicateTaskId,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    TaskNotFound,
    VersionConflict,
)
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.stores.base import Command, TaskStore
from chongming.stores.checks import check_time
from chongming.stores.identity import IdentityCache
from chongming.stores.nodes import CommandRecord, NodeInfo, NodeRecord, TaskCount
from chongming.stores.postgres import rows
from chongming.stores.postgres.commands import CommandsAndNodes, channel_for
from chongming.stores.postgres.connections import (
    close_connection,
    close_pool,
    discard,
    keep_session,
    same_write,
)
from chongming.stores.postgres.driver import (
    is_connection_error,
    load_asyncpg,
    raise_translated,
    translate,
    translating,
)
from chongming.stores.postgres.dsn import ConnectTarget, parse_dsn, redact_text
from chongming.stores.postgres.durable import DurableMethods
from chongming.stores.postgres.limits import ClusterLimitMethods
from chongming.stores.postgres.listener import CommandListener
from chongming.stores.postgres.queue import QueueMethods, WorkQueue
from chongming.stores.postgres.rows import PLANNER
from chongming.stores.postgres.schema import SchemaState, bootstrap, quote_schema
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS, Statements
from chongming.stores.postgres.writer import GroupWriter, WriteArgs, WriteResult
from chongming.stores.writes import StateWrite, WriteOutcome
from chongming.stores.writes import WriteResult as StateResult

__all__ = ["PostgresStoreStatistics", "PostgresTaskStore"]

log = logging.getLogger("chongming.stores.postgres")
T = TypeVar("T")

_BACKOFF = (0.05, 0.2, 0.5, 1.0)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PostgresStoreStatistics:
    """Counters for monitoring and benchmarks."""

    batches: int
    batched_writes: int
    listener_reconnects: int
    read_retries: int
    resolved_writes: int


class PostgresTaskStore(ClusterLimitMethods, DurableMethods, QueueMethods, TaskStore):
    """Task store on PostgreSQL (asyncpg). See the module docstring for failure handling."""

    def __init__(
        self,
        dsn_or_pool: Any,
        *,
        schema: str = "chongming",
        min_size: int = 1,
        max_size: int = 10,
        application_name: str = "chongming",
        password: str | None = None,
        connect_timeout: float = 5.0,
        group_commit: bool = True,
        writers: int = 2,
        max_batch: int = 500,
        max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
        read_attempts: int = 3,
        listener_probe_interval: float = 10.0,
        close_timeout: float = 10.0,
    ) -> None:
        self._asyncpg = load_asyncpg()
        quote_schema(schema)
        if not 1 <= min_size <= max_size:
            raise ConfigurationError(f"need 1 <= min_size <= max_size, got {min_size}, {max_size}")
        if connect_timeout <= 0 or read_attempts < 1:
            raise ConfigurationError("connect_timeout and read_attempts must be positive")
        limit = check_limit(max_payload_bytes)
        self._target: ConnectTarget | None = None
        self._pool: Any = None
        if isinstance(dsn_or_pool, str):
            self._target = parse_dsn(dsn_or_pool, password=password)
            self._owns_pool = True
            timeout = self._target.connect_timeout
            self._connect_timeout = connect_timeout if timeout is None else timeout
        elif isinstance(dsn_or_pool, self._asyncpg.Pool):
            self._pool = dsn_or_pool
            self._owns_pool = False
            self._connect_timeout = connect_timeout
        else:
            raise ConfigurationError(
                f"PostgresTaskStore needs a DSN string or an asyncpg.Pool, "
                f"got {type(dsn_or_pool).__name__}"
            )
        self._schema = schema
        self._sql = Statements.for_schema(schema)
        self._min_size = min_size
        self._max_size = max_size
        self._application_name = application_name
        self._limit = limit
        self._identities = IdentityCache()
        self._read_attempts = read_attempts
        self._close_timeout = close_timeout
        self._channel = channel_for(schema)
        self._writer = (
            GroupWriter(self._execute_writes, writers=writers, max_batch=max_batch)
            if group_commit
            else None
        )
        self._listener = CommandListener(
            self._listen_connect,
            self._listen_disconnect,
            self._channel,
            probe_interval=listener_probe_interval,
        )
        self._commands = CommandsAndNodes(
            self._sql,
            self._channel,
            read=self._read,
            once=self._once,
            fail=self._raise,
            attempts=read_attempts,
        )
        self._queue = WorkQueue(
            quote_schema(self._schema),
            read=self._read,
            once=self._once,
            fail=self._raise,
            attempts=read_attempts,
            limit=self._limit,
            listener=CommandListener(
                self._listen_connect,
                self._listen_disconnect,
                channel_for(schema + "/queue"),
                probe_interval=listener_probe_interval,
            ),
        )
        self._state: SchemaState | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._read_retries = 0
        self._resolved_writes = 0

    # -- identity ------------------------------------------------------------

    def __repr__(self) -> str:
        where = f"dsn={self._target.redacted!r}" if self._target else "pool=<caller's pool>"
        return f"PostgresTaskStore({where}, schema={self._schema!r}, closed={self._closed})"

    __str__ = __repr__

    @property
    def location(self) -> str:
        """Where the store is, as it may be shown: the DSN with its password redacted.

        ``postgresql://user:***@host/db`` (plus ``schema=…`` when not the
        default); a store on the caller's pool says so.
        """
        where = self._target.redacted if self._target else "PostgreSQL (the caller's pool)"
        return where if self._schema == "chongming" else f"{where} schema={self._schema}"

    @property
    def schema(self) -> str:
        return self._schema

    @property
    def application_name(self) -> str:
        return self._application_name

    @property
    def read_only(self) -> bool:
        """True when this role may read but not write the tables (known after open)."""
        return self._state is not None and not self._state.writable

    def statistics(self) -> PostgresStoreStatistics:
        return PostgresStoreStatistics(
            batches=self._writer.batches if self._writer else 0,
            batched_writes=self._writer.writes if self._writer else 0,
            listener_reconnects=self._listener.reconnects,
            read_retries=self._read_retries,
            resolved_writes=self._resolved_writes,
        )

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Create the pool (if ours) and the schema (if missing). Idempotent."""
        self._check_open()
        if self._state is not None:
            return
        async with self._open_lock:
            if self._state is not None:
                return
            self._check_open()
            created = False
            if self._pool is None:
                self._pool = await self._create_pool()
                created = True
            try:
                self._state = await self._with_retries(
                    "preparing the chongming schema", lambda conn: bootstrap(conn, self._schema)
                )
            except BaseException:
                if created:
                    pool, self._pool = self._pool, None
                    await close_pool(pool, self._close_timeout)
                raise

    async def close(self) -> None:
        """Finish queued writes, close the listener and (our own) pool. Idempotent.

        Graceful first; falls back to terminating connections when that fails
        or is cancelled. A pool passed in by the caller stays open.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer is not None:
                await self._writer.close(self._close_timeout)
            await self._listener.close()
            await self._queue.close()
        finally:
            pool, self._pool = self._pool, None
            if pool is not None and self._owns_pool:
                await close_pool(pool, self._close_timeout)

    # -- snapshots -----------------------------------------------------------

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

    # -- history -------------------------------------------------------------

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

    # -- hot path ------------------------------------------------------------

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

    # -- commands (see commands.py) ---------------------------------------------

    async def submit_command(self, command: Command) -> None:
        await self._commands.submit(command)

    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        return await self._commands.claim(owner, lease_seconds, limit)

    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        return await self._commands.complete(command_id, owner, outcome)

    async def release_command(self, command_id: str, owner: str) -> bool:
        return await self._commands.release(command_id, owner)

    async def wait_command_hint(self) -> None:
        """Return when a command may have arrived, or after the listener reconnected.

        Only a hint: poll afterwards. The first call (and any call after the
        listening session was lost) returns as soon as LISTEN is in place,
        because notifications sent before that were missed.

        Cancellation: safe; the listener connection stays for the next call.
        """
        self._check_open()
        await self.open()
        with translating("waiting for a command notification", self._scrub):
            await self._listener.wait()
        self._check_open()

    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        return await self._commands.records(task_id, limit)

    # -- nodes (see commands.py) ------------------------------------------------

    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        return await self._commands.register_node(info, ttl_seconds)

    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        return await self._commands.renew_node(owner, incarnation, ttl_seconds)

    async def release_node(self, owner: str, incarnation: str) -> None:
        await self._commands.release_node(owner, incarnation)

    async def nodes(self) -> list[NodeRecord]:
        return await self._commands.nodes()

    # -- counts ----------------------------------------------------------------

    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        return await self._commands.task_counts(active_only=active_only)

    # -- plumbing ------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("PostgresTaskStore")

    def _scrub(self, text: str) -> str:
        return redact_text(text, self._target.secrets if self._target else ())

    def _raise(self, error: BaseException, what: str) -> Any:
        raise_translated(error, what, self._scrub)

    async def _create_pool(self) -> Any:
        assert self._target is not None
        target = self._target
        what = f"connecting to PostgreSQL at {target.redacted!r}"
        try:
            return await asyncio.wait_for(
                self._asyncpg.create_pool(
                    target.dsn,
                    min_size=self._min_size,
                    max_size=self._max_size,
                    timeout=self._connect_timeout,
                    server_settings={"application_name": self._application_name, **PLANNER},
                    reset=keep_session,
                    init=rows.known_arrays,
                    **target.kwargs,
                ),
                self._connect_timeout * 2,
            )
        except (ValueError, TypeError) as error:
            # DSN parse errors can quote a fragment of the password: name the type only.
            raise ConfigurationError(
                f"malformed PostgreSQL DSN {target.redacted!r} ({type(error).__name__})"
            ) from None
        except Exception as error:
            if isinstance(error, StoreError):
                raise
            self._raise(error, what)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A pooled connection that is discarded (not reused) after a connection error."""
        async with self._pool.acquire() as conn:
            try:
                yield conn
            except Exception as error:
                if is_connection_error(error):
                    discard(conn)
                raise

    async def _with_retries(self, what: str, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``work`` on a pooled connection, retrying connection errors (bounded)."""
        attempt = 0
        while True:
            try:
                async with self._connection() as conn:
                    return await work(conn)
            except StoreError:
                raise
            except ConfigurationError:
                raise
            except Exception as error:
                attempt += 1
                if not is_connection_error(error) or attempt >= self._read_attempts:
                    self._raise(error, what)
                self._read_retries += 1
                log.info("%s: %s; retrying", what, self._scrub(type(error).__name__))
                await asyncio.sleep(_BACKOFF[min(attempt - 1, len(_BACKOFF) - 1)])

    async def _read(self, what: str, work: Callable[[Any], Awaitable[T]]) -> T:
        self._check_open()
        await self.open()
        return await self._with_retries(what, work)

    async def _once(self, what: str, work: Callable[[Any], Awaitable[T]]) -> T:
        """One try of a write; raw driver errors escape for the caller to resolve."""
        self._check_open()
        await self.open()
        if self.read_only:
            raise StoreError(f"{what}: this role may only read schema {self._schema!r}")
        async with self._connection() as conn:
            return await work(conn)

    async def _written(
        self,
        what: str,
        args: WriteArgs,
        resolve: Callable[[], Awaitable[WriteResult | None]],
        *,
        resolve_first: bool = False,
    ) -> WriteResult:
        """:meth:`_write`; an unknown outcome also forgets the task's identity."""
        try:
            return await self._write(what, args, resolve, resolve_first=resolve_first)
        except BaseException:
            self._identities.forget(args.key)
            raise

    async def _write(
        self,
        what: str,
        args: WriteArgs,
        resolve: Callable[[], Awaitable[WriteResult | None]],
        *,
        resolve_first: bool = False,
    ) -> WriteResult:
        """Run one write; after a connection error, re-read before trying again.

        ``resolve_first``: the write was sent already and met a connection
        error, so even the first attempt re-reads before running it.
        """
        self._check_open()
        await self.open()
        if self.read_only:
            raise StoreError(f"{what}: this role may only read schema {self._schema!r}")
        last: BaseException | None = None
        for attempt in range(self._read_attempts):
            if attempt or resolve_first:
                step = attempt if resolve_first else attempt - 1
                await asyncio.sleep(_BACKOFF[min(step, len(_BACKOFF) - 1)])
                try:
                    outcome = await resolve()
                except StoreError:
                    raise StoreUnavailable(
                        f"{what}: the connection failed and the outcome could not be "
                        "re-read; it may or may not have been written"
                    ) from None
                self._resolved_writes += 1
                if outcome is not None:
                    return outcome
            try:
                if self._writer is not None:
                    return await self._writer.write(args)
                return (await self._execute_writes([args]))[0]
            except (StoreError, ConfigurationError):
                raise
            except Exception as error:
                if not is_connection_error(error):
                    self._raise(error, what)
                last = error
        assert last is not None
        raise translate(last, what, self._scrub) from None

    async def _execute_writes(self, batch: list[WriteArgs]) -> list[WriteResult]:
        """Run writes as set-based statements: one per round, each task once per round.

        A task that has several writes in the batch gets one per round, in
        order; rounds run one after the other on the same connection.
        """
        rounds: list[list[int]] = []
        seen: dict[str, int] = {}
        for index, args in enumerate(batch):
            round_number = seen.get(args.key, -1) + 1
            seen[args.key] = round_number
            if round_number == len(rounds):
                rounds.append([])
            rounds[round_number].append(index)
        results: list[WriteResult | None] = [None] * len(batch)
        async with self._connection() as conn:
            for members in rounds:
                found = await conn.fetch(*self._sql.write_for([batch[i] for i in members]))
                for row in found:
                    results[members[row["ord"] - 1]] = WriteResult(
                        applied=row["applied"], current=row["current"]
                    )
        assert all(result is not None for result in results)
        return [result for result in results if result is not None]

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

    async def _listen_connect(self) -> Any:
        await self.open()
        what = "connecting the command listener"
        try:
            if not self._owns_pool:
                return await self._pool.acquire()
            assert self._target is not None
            return await asyncio.wait_for(
                self._asyncpg.connect(
                    self._target.dsn,
                    timeout=self._connect_timeout,
                    server_settings={"application_name": self._application_name},
                    **self._target.kwargs,
                ),
                self._connect_timeout * 2,
            )
        except Exception as error:
            self._raise(error, what)

    async def _listen_disconnect(self, conn: Any) -> None:
        if not self._owns_pool and self._pool is not None:
            await self._pool.release(conn)
            return
        await close_connection(conn)


_WRITTEN = StateResult(outcome=WriteOutcome.WRITTEN)
_CONFLICT = StateResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = StateResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = StateResult(outcome=WriteOutcome.NOT_FOUND)
