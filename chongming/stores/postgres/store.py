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
import dataclasses
from typing import Any

from chongming.errors import ConfigurationError
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit
from chongming.stores.base import TaskStore
from chongming.stores.identity import IdentityCache
from chongming.stores.postgres.activity import ActivityMethods
from chongming.stores.postgres.commands import CommandMethods, CommandsAndNodes, channel_for
from chongming.stores.postgres.connections import close_pool
from chongming.stores.postgres.core import CoreMethods
from chongming.stores.postgres.driver import load_asyncpg
from chongming.stores.postgres.dsn import ConnectTarget, parse_dsn
from chongming.stores.postgres.durable import DurableMethods
from chongming.stores.postgres.journal import JournalMethods
from chongming.stores.postgres.limits import ClusterLimitMethods
from chongming.stores.postgres.listener import CommandListener
from chongming.stores.postgres.pool import PostgresPlumbing
from chongming.stores.postgres.queue import WorkQueue
from chongming.stores.postgres.queue_methods import QueueMethods
from chongming.stores.postgres.rates import RateLimitMethods
from chongming.stores.postgres.retention import RetentionMethods
from chongming.stores.postgres.schedules import ScheduleMethods
from chongming.stores.postgres.schema import SchemaState, bootstrap, quote_schema
from chongming.stores.postgres.search import SearchMethods
from chongming.stores.postgres.sql import Statements
from chongming.stores.postgres.writer import GroupWriter

__all__ = ["PostgresStoreStatistics", "PostgresTaskStore"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PostgresStoreStatistics:
    """Counters for monitoring and benchmarks."""

    batches: int
    batched_writes: int
    listener_reconnects: int
    read_retries: int
    resolved_writes: int


class PostgresTaskStore(
    CoreMethods,
    CommandMethods,
    PostgresPlumbing,  # before the forwarders: their _read is a stub for this one
    QueueMethods,
    ClusterLimitMethods,
    RateLimitMethods,
    DurableMethods,
    RetentionMethods,
    ScheduleMethods,
    ActivityMethods,
    SearchMethods,
    JournalMethods,
    TaskStore,
):
    """Task store on PostgreSQL (asyncpg). See the module docstring for failure handling.

    One module per capability of the port (``postgres/core.py``,
    ``commands.py``, ``queue.py``, ``limits.py``, ``durable.py``); the pool
    and the retry plumbing they share are ``postgres/pool.py``'s.
    """

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
        # Connected on the first QueuedTask wait only (a worker never waits).
        self._end_listener = CommandListener(
            self._listen_connect,
            self._listen_disconnect,
            channel_for(schema + "/ends"),
            probe_interval=listener_probe_interval,
        )
        self._state: SchemaState | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._read_retries = 0
        self._resolved_writes = 0

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
            await self._end_listener.close()
            await self._queue.close()
        finally:
            pool, self._pool = self._pool, None
            if pool is not None and self._owns_pool:
                await close_pool(pool, self._close_timeout)
