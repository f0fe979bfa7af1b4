"""The PostgreSQL store's plumbing: the pool, retried reads, resolved writes, listening.

Failure handling (docs/reliability.md, P6): a connection error is retried for
reads (bounded, with a short backoff); a write that met a connection error
has an unknown outcome, so it is re-read first (its ``resolve``) and runs
again only if it did not commit. Every capability module reaches the
database through these methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from chongming.errors import ConfigurationError, StoreClosed, StoreError, StoreUnavailable
from chongming.stores.identity import IdentityCache
from chongming.stores.postgres.commands import CommandsAndNodes
from chongming.stores.postgres.connections import close_connection, discard, keep_session
from chongming.stores.postgres.driver import is_connection_error, raise_translated, translate
from chongming.stores.postgres.dsn import ConnectTarget, redact_text
from chongming.stores.postgres.listener import CommandListener
from chongming.stores.postgres.rows import PLANNER, known_arrays
from chongming.stores.postgres.sql import Statements
from chongming.stores.postgres.writer import GroupWriter, WriteArgs, WriteResult

__all__ = ["PostgresPlumbing"]

log = logging.getLogger("chongming.stores.postgres")
T = TypeVar("T")

_BACKOFF = (0.05, 0.2, 0.5, 1.0)


class PostgresPlumbing:
    """Connections and retries shared by the capabilities (state set by ``PostgresTaskStore``)."""

    _asyncpg: Any
    _target: ConnectTarget | None
    _pool: Any
    _owns_pool: bool
    _connect_timeout: float
    _schema: str
    _sql: Statements
    _min_size: int
    _max_size: int
    _application_name: str
    _limit: int | None
    _identities: IdentityCache
    _read_attempts: int
    _close_timeout: float
    _writer: GroupWriter | None
    _listener: CommandListener
    _commands: CommandsAndNodes
    _closed: bool
    _read_retries: int
    _resolved_writes: int

    if TYPE_CHECKING:

        async def open(self) -> None: ...

        @property
        def read_only(self) -> bool: ...

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
            async with asyncio.timeout(self._connect_timeout * 2):
                return await self._asyncpg.create_pool(
                    target.dsn,
                    min_size=self._min_size,
                    max_size=self._max_size,
                    timeout=self._connect_timeout,
                    server_settings={"application_name": self._application_name, **PLANNER},
                    reset=keep_session,
                    init=known_arrays,
                    **target.kwargs,
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

    async def _listen_connect(self) -> Any:
        await self.open()
        what = "connecting the command listener"
        try:
            if not self._owns_pool:
                return await self._pool.acquire()
            assert self._target is not None
            async with asyncio.timeout(self._connect_timeout * 2):
                return await self._asyncpg.connect(
                    self._target.dsn,
                    timeout=self._connect_timeout,
                    server_settings={"application_name": self._application_name},
                    **self._target.kwargs,
                )
        except Exception as error:
            self._raise(error, what)

    async def _listen_disconnect(self, conn: Any) -> None:
        if not self._owns_pool and self._pool is not None:
            await self._pool.release(conn)
            return
        await close_connection(conn)
