"""The outbox: enqueue from a business database that is not the store's.

When the business data lives in another database than the task store, one
transaction cannot cover both. So the business transaction writes an
*outbox row* (:func:`outbox_enqueue`), and a relay (:class:`OutboxRelay`)
moves committed rows to the store:

- it takes unpublished rows with ``FOR UPDATE SKIP LOCKED`` (many relays never
  take the same row, and a row whose transaction commits late is simply
  found later: there is no cursor to skip past it);
- it enqueues each with the idempotency key ``<prefix><id>`` and the row's
  input, so a relay that crashed after enqueueing but before marking the
  row published leaves a row that the next relay enqueues again, and gets
  the same task back (``created=False``), never a second one;
- it marks the batch published in the same short transaction;
- a row the store can never take (a task id already used, its key already
  naming other input, arguments too large) is set aside with its ``error``
  in the same transaction, so it cannot hold up the rows behind it.

Exactly once here means: every committed row becomes one task, and a row
whose transaction rolled back becomes none. It relies on one thing outside the
relay: the key ``<prefix><id>`` is still in the store when a row is retried,
i.e. for as long as a row can wait unpublished after the relay that enqueued
it died. Retention deletes a key only with its task and never within the
idempotency window after the task ended (docs/retention.md); keep that
window above the longest a relay can be down. Proven with real relay processes
SIGKILLed mid-batch in tests/control/test_outbox_processes.py.

PostgreSQL (asyncpg) only. The table is created by :func:`install_outbox`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from types import TracebackType
from typing import TYPE_CHECKING, Any

from chongming.background import BackgroundTask
from chongming.errors import (
    ConfigurationError,
    ControllerClosed,
    DuplicateTaskId,
    IdempotencyConflict,
    PayloadError,
    StoreClosed,
    StoreError,
)
from chongming.state.payload import check_task_id, json_form_arguments
from chongming.task_api.registry import check_task_name

if TYPE_CHECKING:
    from chongming.controller.controller import Controller

__all__ = ["OutboxRelay", "install_outbox", "outbox_enqueue"]

_log = logging.getLogger("chongming.outbox")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")
_OPTIONS = ("task_id", "label", "bucket_key", "priority", "version")
#: Keyword names ``Controller.enqueue`` takes for itself.
_RESERVED = frozenset({"name", "tags", "not_before", "idempotency_key", "connection", *_OPTIONS})
#: Refusals that no retry can change: the row is set aside with the error.
_REFUSED = (ConfigurationError, PayloadError, IdempotencyConflict, DuplicateTaskId)
_ERROR_CHARS = 1000


def _table(name: str) -> str:
    if not isinstance(name, str) or not _TABLE.fullmatch(name):
        raise ConfigurationError(f"outbox table must be [schema.]identifier, got {name!r}")
    return ".".join(f'"{part}"' for part in name.split("."))


async def install_outbox(conn: Any, *, table: str = "chongming_outbox") -> None:
    """Create the outbox table (and its index of pending rows) if it does not exist.

    ``error`` holds why the store refused a row (it is then left unpublished
    and not taken again); set it back to NULL to have the row relayed again.
    """
    quoted = _table(table)
    index = f'"{table.replace(".", "_")}_pending"'
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted} ("
        " id bigserial PRIMARY KEY,"
        " name text NOT NULL,"
        " args jsonb NOT NULL,"
        " kwargs jsonb NOT NULL,"
        " options jsonb NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now(),"
        " published_at timestamptz,"
        " error text)"
    )
    await conn.execute(f"ALTER TABLE {quoted} ADD COLUMN IF NOT EXISTS error text")
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS {index} ON {quoted} (id)"
        " WHERE published_at IS NULL AND error IS NULL"
    )


async def outbox_enqueue(
    conn: Any,
    name: str,
    *args: Any,
    table: str = "chongming_outbox",
    task_id: str | None = None,
    label: str | None = None,
    bucket_key: str | None = None,
    priority: int | None = None,
    version: int | None = None,
    **kwargs: Any,
) -> int:
    """Write an outbox row in the caller's transaction; its id. The relay enqueues it later."""
    in_transaction = getattr(conn, "is_in_transaction", None)
    if not callable(in_transaction) or not in_transaction():
        raise ConfigurationError(
            "outbox_enqueue needs an asyncpg connection inside your transaction"
        )
    check_task_name(name)
    if task_id is not None:
        check_task_id(task_id)
    clashing = sorted(_RESERVED & kwargs.keys())
    if clashing:
        raise ConfigurationError(
            f"argument {clashing[0]!r} clashes with an enqueue option of the same name"
        )
    plain_args, plain_kwargs = json_form_arguments(args, kwargs)
    options = {
        key: value
        for key, value in (
            ("task_id", task_id),
            ("label", label),
            ("bucket_key", bucket_key),
            ("priority", priority),
            ("version", version),
        )
        if value is not None
    }
    row_id: int = await conn.fetchval(
        # Sent as text and cast here, so a jsonb codec on the pool cannot encode twice.
        f"INSERT INTO {_table(table)} (name, args, kwargs, options)"
        " VALUES ($1, $2::text::jsonb, $3::text::jsonb, $4::text::jsonb) RETURNING id",
        name,
        json.dumps(list(plain_args)),
        json.dumps(plain_kwargs),
        json.dumps(options),
    )
    return row_id


class OutboxRelay:
    """Moves committed outbox rows to the store; run as many as you like.

    ``pool`` is an asyncpg pool on the business database. ``key_prefix``
    makes the idempotency keys (``outbox:<id>`` by default): give each
    business database its own prefix if several relay into one store.
    ``concurrency``: enqueues of a batch in flight at once (each is a store
    commit; keep it within the store's pool), so the rows of one batch do not
    become tasks in id order unless it is 1.
    ``start()`` / ``aclose()``, or ``async with``: relays in the background.
    Counters: ``published`` (rows moved), ``replayed`` (of those, rows whose
    task a relay that died had already enqueued), ``refused`` (rows set aside).
    """

    def __init__(
        self,
        controller: Controller,
        pool: Any,
        *,
        table: str = "chongming_outbox",
        batch: int = 100,
        poll_interval: float = 0.5,
        key_prefix: str = "outbox:",
        concurrency: int = 8,
    ) -> None:
        for what, value in (("batch", batch), ("concurrency", concurrency)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{what} must be an int >= 1, got {value!r}")
        self._controller = controller
        self._pool = pool
        quoted = _table(table)
        self._take = (
            "SELECT id, name, args::text AS args, kwargs::text AS kwargs,"
            f" options::text AS options FROM {quoted}"
            " WHERE published_at IS NULL AND error IS NULL"
            " ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"
        )
        self._mark = f"UPDATE {quoted} SET published_at = now() WHERE id = ANY($1::bigint[])"
        self._set_aside = (
            f"UPDATE {quoted} AS o SET error = r.error"
            " FROM unnest($1::bigint[], $2::text[]) AS r(id, error) WHERE o.id = r.id"
        )
        self._batch = batch
        self._concurrency = concurrency
        self._poll = poll_interval
        self._prefix = key_prefix
        self._relay = BackgroundTask("chongming:outbox-relay")
        self._stopping = asyncio.Event()
        self.published = 0
        self.replayed = 0
        self.refused = 0

    async def relay_once(self) -> int:
        """One batch: take, enqueue, mark, commit. The number of rows taken off the outbox."""
        moved: list[int] = []
        refused: list[tuple[int, str]] = []
        replayed = 0
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(self._take, self._batch)
            gate = asyncio.Semaphore(self._concurrency)
            failed: list[Exception] = []

            async def one(row: Any) -> bool | None:
                async with gate:
                    if failed:
                        return None  # the batch will roll back: start no more
                    try:
                        return await self._enqueue(row)
                    except _REFUSED:
                        raise
                    except Exception as error:
                        failed.append(error)
                        raise

            # Each enqueue is its own store commit: in flight together, they
            # share the server's WAL flushes. Every one ends before the verdict.
            outcomes = await asyncio.gather(*(one(row) for row in rows), return_exceptions=True)
            if failed:
                raise failed[0]  # not the rows' fault: the batch rolls back and is retried
            for row, outcome in zip(rows, outcomes, strict=True):
                if isinstance(outcome, _REFUSED):
                    why = f"{type(outcome).__name__}: {outcome}"[:_ERROR_CHARS]
                    _log.warning("outbox row %s set aside: %s", row["id"], why)
                    refused.append((row["id"], why))
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    moved.append(row["id"])
                    replayed += not outcome
            if moved:
                await conn.execute(self._mark, moved)
            if refused:
                await conn.execute(
                    self._set_aside, [r for r, _ in refused], [why for _, why in refused]
                )
        self.published += len(moved)
        self.replayed += replayed
        self.refused += len(refused)
        return len(rows)

    async def _enqueue(self, row: Any) -> bool:
        """Enqueue one row; whether its task is new (False: a dead relay had enqueued it)."""
        options = {k: v for k, v in json.loads(row["options"]).items() if k in _OPTIONS}
        args, kwargs = json.loads(row["args"]), json.loads(row["kwargs"])
        key = f"{self._prefix}{row['id']}"
        try:
            queued = await self._controller.enqueue(
                row["name"], *args, idempotency_key=key, **options, **kwargs
            )
        except IdempotencyConflict as conflict:
            # A row without a version is pinned when enqueued; if a worker of a
            # new version came up between a dead relay's enqueue and this one,
            # only the pin differs: the task already there is this row's.
            if "version" in options or not await self._is_this_row(conflict, row, args, kwargs):
                raise
            return False
        return queued.created

    async def _is_this_row(
        self, conflict: IdempotencyConflict, row: Any, args: list[Any], kwargs: dict[str, Any]
    ) -> bool:
        store = self._controller.store
        found = None if store is None else await store.get(conflict.task_id)
        return (
            found is not None
            and found.idempotency_key == conflict.key
            and found.name == row["name"]
            and _canonical(list(found.args), dict(found.kwargs)) == _canonical(args, kwargs)
        )

    def start(self) -> None:
        """Relay in the background until :meth:`aclose` (a second call does nothing)."""
        if self._relay.running:
            return
        self._stopping.clear()
        self._relay.start(self._relay_forever)

    async def aclose(self, grace: float = 10.0) -> None:
        """Stop between batches; a batch still running after ``grace`` s is cancelled.

        A cancelled batch rolls back: its rows stay unpublished, and the next
        relay enqueues them again and gets the same tasks.
        """
        task = self._relay.task
        if task is None:
            return
        self._stopping.set()
        try:
            await asyncio.wait({task}, timeout=grace)
        finally:
            await self._relay.stop()

    async def __aenter__(self) -> OutboxRelay:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _relay_forever(self) -> None:
        while not self._stopping.is_set():
            try:
                moved = await self.relay_once()
            except (ControllerClosed, StoreClosed) as error:
                _log.error("outbox relay stopped: %s", error)
                return
            except (StoreError, OSError) as error:
                _log.warning("outbox relay failed (%s); retrying", error)
                moved = 0
            except Exception:  # a driver error: the batch rolled back, nothing was lost
                _log.exception("outbox relay failed; retrying")
                moved = 0
            if moved < self._batch:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll):
                        await self._stopping.wait()


def _canonical(args: list[Any], kwargs: dict[str, Any]) -> str:
    return json.dumps([args, kwargs], sort_keys=True, separators=(",", ":"))
