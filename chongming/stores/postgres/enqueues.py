"""Group commit for enqueues on PostgreSQL: concurrent enqueues share one statement.

Callers hand over a checked, encoded :class:`Pending` enqueue and await its
answer. One server task takes everything queued so far (each task id at most
once per batch) and writes it in one transaction: one statement inserts the
idempotency keys (``ON CONFLICT DO NOTHING``, which waits for an uncommitted
twin exactly like a single insert does), the tasks whose key it got or that
have none, their transitions (and trace carriers, in the variant for a batch
that holds any), and notifies idle workers at commit. A lone
enqueue waits for nobody; under load the batch grows with it.

What the statement cannot decide alone is left to the single-task path
(:class:`WorkQueue`'s), so every caller gets the same answer either way:

- a key that was taken (a twin, possibly in the same batch): after the
  commit, the stored key decides between "the same task" and
  :class:`IdempotencyConflict`;
- a task id already taken while its key was free: the whole batch rolls back
  and each enqueue runs alone (no key may point at someone else's task);
- any failure of the batch: each enqueue runs alone, after a connection error
  first asking the store whether it was written (the batch may have
  committed).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from chongming.errors import StoreClosed
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS
from chongming.stores.queue import input_digest

__all__ = [
    "EnqueueBatcher",
    "Pending",
    "batch_arguments",
    "batch_insert_sql",
    "is_plain",
    "plain_arguments",
    "plain_insert_sql",
]

_TRANSITIONS = (
    ("version", "int"),
    ("from_status", "text"),
    ("to_status", "text"),
    ("at", "timestamptz"),
    ("trigger", "text"),
    ("actor", "text"),
    ("reason", "text"),
    ("attempt", "int"),
)


@dataclasses.dataclass(slots=True, kw_only=True)
class Pending:
    """One enqueue, checked and encoded: the task row, its transitions, key and digest.

    ``snapshot`` is what the caller gave: a created task is stored as exactly
    that, so the answer is the snapshot itself (no row read back). ``digest``
    is the input's (:func:`~chongming.stores.queue.input_digest`), computed
    only for a task with an idempotency key (see :attr:`input`).
    """

    snapshot: TaskSnapshot
    key: str | None
    digest: str | None
    params: Sequence[Any]
    transitions: Sequence[tuple[Any, ...]]
    future: asyncio.Future[Any] | None = None
    #: The trace carrier as JSON text (``None``: none), written beside the task.
    carrier: str | None = None
    #: The row and first transition are what the recipe implies (:func:`is_plain`).
    plain: bool = False
    #: ``(name, payload JSON, key)`` of facts written with the task (its own transaction).
    facts: Sequence[tuple[str, str, str | None]] = ()

    @property
    def task_id(self) -> str:
        return self.snapshot.task_id

    @property
    def input(self) -> str:
        """The digest of the input (computed now if it was not needed before)."""
        if self.digest is None:
            self.digest = input_digest(self.snapshot)
        return self.digest


def batch_insert_sql(schema: str, *, carriers: bool = False) -> str:
    """The statement of one batch; one row per enqueue, by ordinal.

    Each row: ``created`` (this statement inserted the task) and ``keyed``
    (it inserted the key); a created task is stored as it was given, so no
    column of it comes back. ``carriers``: the variant that also writes trace carriers (used
    only for a batch holding one, so the common statement stays as it is).
    """
    columns = [*((name, "jsonb" if name == "tags" else kind) for name, kind in SNAPSHOT_COLUMNS)]
    columns += [("idempotency_key_in", "text"), ("digest", "text")]
    if carriers:
        columns.append(("carrier_in", "text"))
    arrays = ", ".join(f"${i + 1}::{kind}[]" for i, (_, kind) in enumerate(columns))
    aliases = ", ".join(name for name, _ in columns)
    names = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)
    values = ", ".join(
        "ARRAY(SELECT jsonb_array_elements_text(i.tags))" if name == "tags" else f"i.{name}"
        for name, _ in SNAPSHOT_COLUMNS
    )
    first = len(columns) + 1
    steps = ", ".join(
        [f"${first}::bigint[]"]
        + [f"${first + 1 + i}::{kind}[]" for i, (_, kind) in enumerate(_TRANSITIONS)]
    )
    step_names = ", ".join(name for name, _ in _TRANSITIONS)
    notify = first + 1 + len(_TRANSITIONS)
    carried = (
        f""", carried AS (
    INSERT INTO {schema}.trace_carriers (task_id, carrier)
    SELECT i.task_id, i.carrier_in::jsonb FROM input AS i
    WHERE i.carrier_in IS NOT NULL AND i.task_id IN (SELECT task_id FROM inserted)
    ON CONFLICT (task_id) DO UPDATE SET carrier = EXCLUDED.carrier
)"""
        if carriers
        else ""
    )
    return f"""
WITH input AS (
    SELECT * FROM unnest({arrays}) WITH ORDINALITY AS i({aliases}, ord)
), keyed AS (
    INSERT INTO {schema}.idempotency_keys (idempotency_key, task_id, digest)
    SELECT idempotency_key_in, task_id, digest FROM input WHERE idempotency_key_in IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING task_id
), inserted AS (
    INSERT INTO {schema}.tasks ({names})
    SELECT {values} FROM input AS i
    WHERE i.idempotency_key_in IS NULL OR i.task_id IN (SELECT task_id FROM keyed)
    ON CONFLICT (task_id) DO NOTHING
    RETURNING task_id
), recorded AS (
    INSERT INTO {schema}.transitions (task_id, {step_names})
    SELECT i.task_id, {", ".join(f"tr.{name}" for name, _ in _TRANSITIONS)}
    FROM unnest({steps}) AS tr(ord, {step_names})
    JOIN input AS i ON i.ord = tr.ord
    WHERE i.task_id IN (SELECT task_id FROM inserted)
    ON CONFLICT DO NOTHING
){carried}, notified AS (
    SELECT pg_notify(${notify}, '') FROM (SELECT 1 FROM inserted LIMIT 1) AS any_inserted
)
SELECT i.ord, t.task_id IS NOT NULL AS created,
       i.task_id IN (SELECT task_id FROM keyed) AS keyed,
       (SELECT count(*) FROM notified) AS notified
FROM input AS i LEFT JOIN inserted AS t ON t.task_id = i.task_id
ORDER BY i.ord
"""


def batch_arguments(batch: Sequence[Pending], channel: str, *, carriers: bool = False) -> list[Any]:
    """The arrays of :func:`batch_insert_sql` for ``batch`` (task ids unique in it)."""
    width = len(SNAPSHOT_COLUMNS) + 2 + (1 if carriers else 0)
    arrays: list[list[Any]] = [[] for _ in range(width + 1 + len(_TRANSITIONS))]
    columns = arrays[: len(SNAPSHOT_COLUMNS)]
    keys, digests = arrays[len(SNAPSHOT_COLUMNS)], arrays[len(SNAPSHOT_COLUMNS) + 1]
    carried = arrays[width - 1] if carriers else None
    ords = arrays[width]
    steps = arrays[width + 1 :]
    for ordinal, pending in enumerate(batch, start=1):
        for array, value in zip(columns, pending.params, strict=True):
            array.append(value)
        keys.append(pending.key)
        digests.append(None if pending.key is None else pending.input)
        if carried is not None:
            carried.append(pending.carrier)
        for record in pending.transitions:
            ords.append(ordinal)
            for array, value in zip(steps, record[1:], strict=True):
                array.append(value)
    return [*arrays, channel]


#: What a plain enqueue sends: the recipe. The statement fills in the rest.
_PLAIN_SENT = (
    "task_id",
    "name",
    "label",
    "max_attempts",
    "bucket",
    "bucket_key",
    "tags",
    "priority",
    "created_at",
    "args",
    "kwargs",
    "version",
    "not_before",
    "idempotency_key",
)
_PLAIN_AT = tuple([name for name, _ in SNAPSHOT_COLUMNS].index(name) for name in _PLAIN_SENT)
_KINDS = dict(SNAPSHOT_COLUMNS)
_QUEUED, _PENDING = TaskStatus.QUEUED, TaskStatus.PENDING


def is_plain(snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> bool:
    """Is this the enqueue ``Controller.enqueue`` makes: everything but the recipe implied?

    Queued at version 1, attempt 0, nobody's, nothing run yet, updated and
    queued when created, and one transition: ``pending -> queued`` at that
    time, ``orchestrator:enqueued`` by ``system``. Such a task is written by
    :func:`plain_insert_sql` from its recipe alone (a third of the values).
    """
    s = snapshot
    if not (
        s.status is _QUEUED
        and s.status_version == 1
        and s.attempt == 0
        and s.owner is None
        and s.started_at is None
        and s.finished_at is None
        and s.last_heartbeat_at is None
        and s.progress is None
        and s.failure is None
        and s.result is None
        and s.updated_at == s.created_at
        and s.queued_at == s.created_at
        and len(transitions) == 1
    ):
        return False
    t = transitions[0]
    return (
        t.task_id == s.task_id
        and t.version == 1
        and t.from_status is _PENDING
        and t.to_status is _QUEUED
        and t.at == s.created_at
        and t.trigger == Trigger.ENQUEUED
        and t.actor == "system"
        and t.reason is None
        and t.attempt == 0
    )


def plain_insert_sql(schema: str) -> str:
    """:func:`batch_insert_sql` for plain enqueues only (no carriers): the same rows, answers."""
    columns = [(name, "jsonb" if name == "tags" else _KINDS[name]) for name in _PLAIN_SENT]
    columns.append(("digest", "text"))
    arrays = ", ".join(f"${i + 1}::{kind}[]" for i, (_, kind) in enumerate(columns))
    aliases = ", ".join(name for name, _ in columns)
    notify = len(columns) + 1
    return f"""
WITH input AS (
    SELECT * FROM unnest({arrays}) WITH ORDINALITY AS i({aliases}, ord)
), keyed AS (
    INSERT INTO {schema}.idempotency_keys (idempotency_key, task_id, digest)
    SELECT idempotency_key, task_id, digest FROM input WHERE idempotency_key IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING task_id
), inserted AS (
    INSERT INTO {schema}.tasks (task_id, name, label, status, status_version, attempt,
        max_attempts, bucket, bucket_key, tags, priority, created_at, updated_at, queued_at,
        args, kwargs, version, not_before, idempotency_key)
    SELECT i.task_id, i.name, i.label, '{_QUEUED.value}', 1, 0, i.max_attempts, i.bucket,
        i.bucket_key, ARRAY(SELECT jsonb_array_elements_text(i.tags)), i.priority,
        i.created_at, i.created_at, i.created_at, i.args, i.kwargs, i.version, i.not_before,
        i.idempotency_key
    FROM input AS i
    WHERE i.idempotency_key IS NULL OR i.task_id IN (SELECT task_id FROM keyed)
    ON CONFLICT (task_id) DO NOTHING
    RETURNING task_id, created_at
), recorded AS (
    INSERT INTO {schema}.transitions (task_id, version, from_status, to_status, at, trigger,
        actor, reason, attempt)
    SELECT task_id, 1, '{_PENDING.value}', '{_QUEUED.value}', created_at, '{Trigger.ENQUEUED}',
        'system', NULL, 0
    FROM inserted
    ON CONFLICT DO NOTHING
), notified AS (
    SELECT pg_notify(${notify}, '') FROM (SELECT 1 FROM inserted LIMIT 1) AS any_inserted
)
SELECT i.ord, t.task_id IS NOT NULL AS created,
       i.task_id IN (SELECT task_id FROM keyed) AS keyed,
       (SELECT count(*) FROM notified) AS notified
FROM input AS i LEFT JOIN inserted AS t ON t.task_id = i.task_id
ORDER BY i.ord
"""


def plain_arguments(batch: Sequence[Pending], channel: str) -> list[Any]:
    """The arrays of :func:`plain_insert_sql` for ``batch`` (every one plain, ids unique)."""
    arrays: list[list[Any]] = [[] for _ in range(len(_PLAIN_AT) + 1)]
    columns = list(zip(arrays, _PLAIN_AT, strict=False))
    digests = arrays[-1]
    for pending in batch:
        params = pending.params
        for array, index in columns:
            array.append(params[index])
        digests.append(None if pending.key is None else pending.input)
    return [*arrays, channel]


Run = Callable[[list[Pending]], Awaitable[None]]


class EnqueueBatcher:
    """Batches enqueues; started on first use, drained by ``close``."""

    def __init__(self, run: Run, *, max_batch: int = 500) -> None:
        self._run = run  # settles every future of the batch it is given
        self._max_batch = max_batch
        self._queue: asyncio.Queue[Pending | list[Pending] | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def submit(self, pending: Pending) -> Any:
        """Enqueue in the next batch. Cancelled while queued: dropped; in flight: may commit."""
        if self._closing:
            raise StoreClosed("PostgresTaskStore")
        loop = asyncio.get_running_loop()
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = loop.create_task(self._serve(self._queue), name="chongming-pg-enqueues")
        pending.future = loop.create_future()
        self._queue.put_nowait(pending)
        return await pending.future

    def submit_many(self, batch: Sequence[Pending]) -> list[asyncio.Future[Any]]:
        """Queue many enqueues at once (no task each); await the futures in any order.

        They join the next batches with any other caller's. Cancellation is
        the caller's: a future it stops awaiting may still be written.
        """
        if self._closing:
            raise StoreClosed("PostgresTaskStore")
        loop = asyncio.get_running_loop()
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = loop.create_task(self._serve(self._queue), name="chongming-pg-enqueues")
        futures: list[asyncio.Future[Any]] = []
        for pending in batch:
            future = pending.future = loop.create_future()
            futures.append(future)
        self._queue.put_nowait(list(batch))  # one queue entry for the lot
        return futures

    async def close(self, grace: float) -> None:
        """Finish what is queued (up to ``grace`` seconds), then stop; the rest is refused."""
        self._closing = True
        task, queue = self._task, self._queue
        self._task = None
        if task is None or queue is None:
            return
        queue.put_nowait(None)  # after everything queued so far
        done, _ = await asyncio.wait([task], timeout=grace)
        if not done:
            task.cancel()
            await asyncio.wait([task])
        while not queue.empty():
            left = queue.get_nowait()
            for pending in [] if left is None else left if isinstance(left, list) else [left]:
                if pending.future is not None and not pending.future.done():
                    pending.future.set_exception(StoreClosed("PostgresTaskStore"))

    async def _serve(self, queue: asyncio.Queue[Pending | list[Pending] | None]) -> None:
        held: list[Pending] = []  # a repeated task id waits for the next batch
        stop = False
        while held or not stop:
            if not held:
                first = await queue.get()
                if first is None:
                    return
                if isinstance(first, list):
                    held.extend(first)
                else:
                    held.append(first)
            batch: list[Pending] = []
            ids: set[str] = set()
            later: list[Pending] = []
            for pending in held:
                self._place(pending, batch, ids, later)
            while len(batch) < self._max_batch and not stop and not queue.empty():
                item = queue.get_nowait()
                if item is None:
                    stop = True
                elif isinstance(item, list):
                    for pending in item:
                        self._place(pending, batch, ids, later)
                else:
                    self._place(item, batch, ids, later)
            held = later
            if batch:
                await self._send(batch)

    async def _send(self, batch: list[Pending]) -> None:
        try:
            await self._run(batch)
        except asyncio.CancelledError:
            for pending in batch:
                if pending.future is not None and not pending.future.done():
                    pending.future.cancel()
            raise
        except Exception as error:  # a bug: never leave a caller waiting
            for pending in batch:
                if pending.future is not None and not pending.future.done():
                    pending.future.set_exception(error)

    def _place(
        self, pending: Pending, batch: list[Pending], ids: set[str], later: list[Pending]
    ) -> None:
        future = pending.future
        if future is None or future.done():
            return  # its caller gave up before it was sent
        if pending.task_id in ids or len(batch) >= self._max_batch:
            later.append(pending)
            return
        ids.add(pending.task_id)
        batch.append(pending)
