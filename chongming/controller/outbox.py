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
- it marks the batch published in the same short transaction.

PostgreSQL (asyncpg) only. The table is created by :func:`install_outbox`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from chongming.errors import ConfigurationError, StoreError
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


def _table(name: str) -> str:
    if not isinstance(name, str) or not _TABLE.fullmatch(name):
        raise ConfigurationError(f"outbox table must be [schema.]identifier, got {name!r}")
    return ".".join(f'"{part}"' for part in name.split("."))


async def install_outbox(conn: Any, *, table: str = "chongming_outbox") -> None:
    """Create the outbox table (and its index of unpublished rows) if it does not exist."""
    quoted = _table(table)
    index = f'"{table.replace(".", "_")}_unpublished"'
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted} ("
        " id bigserial PRIMARY KEY,"
        " name text NOT NULL,"
        " args jsonb NOT NULL,"
        " kwargs jsonb NOT NULL,"
        " options jsonb NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now(),"
        " published_at timestamptz)"
    )
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS {index} ON {quoted} (id) WHERE published_at IS NULL"
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
        f"INSERT INTO {_table(table)} (name, args, kwargs, options)"
        " VALUES ($1, $2::jsonb, $3::jsonb, $4::jsonb) RETURNING id",
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
    ) -> None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigurationError(f"batch must be an int >= 1, got {batch!r}")
        self._controller = controller
        self._pool = pool
        self._table = _table(table)
        self._batch = batch
        self._poll = poll_interval
        self._prefix = key_prefix
        self._task: asyncio.Task[None] | None = None
        self.published = 0

    async def relay_once(self) -> int:
        """One batch: take, enqueue, mark published, commit. The number of rows moved."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                f"SELECT id, name, args, kwargs, options FROM {self._table}"
                " WHERE published_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
                self._batch,
            )
            for row in rows:
                options = {k: v for k, v in json.loads(row["options"]).items() if k in _OPTIONS}
                await self._controller.enqueue(
                    row["name"],
                    *json.loads(row["args"]),
                    idempotency_key=f"{self._prefix}{row['id']}",
                    **options,
                    **json.loads(row["kwargs"]),
                )
            if rows:
                await conn.execute(
                    f"UPDATE {self._table} SET published_at = now() WHERE id = ANY($1::bigint[])",
                    [row["id"] for row in rows],
                )
        self.published += len(rows)
        return len(rows)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._relay_forever(), name="chongming:outbox-relay"
        )

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    async def _relay_forever(self) -> None:
        while True:
            try:
                moved = await self.relay_once()
            except (StoreError, OSError) as error:
                _log.warning("outbox relay failed (%s); retrying", error)
                moved = 0
            except Exception:  # a driver error: the batch rolled back, nothing was lost
                _log.exception("outbox relay failed; retrying")
                moved = 0
            if moved < self._batch:
                await asyncio.sleep(self._poll)
