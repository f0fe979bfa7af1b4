"""The work queue on SQLite (blocking: the writer's thread, inside its ``BEGIN IMMEDIATE``).

The writer runs these in the same transaction as the rest of its batch, so
each function works inside a ``SAVEPOINT``: a refused enqueue (an
idempotency conflict, a duplicate id) undoes exactly its own statements and
leaves its neighbours' writes alone. ``BEGIN IMMEDIATE`` makes a claim a
read-then-write that no other process can interleave: two workers never
take the same task.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming.errors import ConfigurationError, DuplicateTaskId, IdempotencyConflict
from chongming.state.attempts import CONTINUES_ATTEMPT
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.triggers import Trigger
from chongming.stores.checks import check_transitions
from chongming.stores.codec import dump
from chongming.stores.durable import Fact, check_enqueue_facts
from chongming.stores.ports.carriers import CarrierStore
from chongming.stores.ports.queue import QueueStore
from chongming.stores.queue import (
    AGED_LEVELS,
    ClaimedTask,
    Enqueued,
    Serves,
    check_claim,
    check_enqueued,
    check_exclude_tags,
    check_pool_tags,
    check_start_claimed,
    check_trace_carrier,
    decode_trace_carrier,
    encode_trace_carrier,
    input_digest,
)
from chongming.stores.sqlite import rows
from chongming.stores.sqlite.batch import INSERT_TASK, INSERT_TRANSITION
from chongming.stores.sqlite.internals import SqliteInternals
from chongming.stores.sqlite.rows import (
    TASK_NAMES,
    TRANSITION_COLUMNS,
    snapshot_from_row,
    transition_from_row,
)

__all__ = [
    "INSERT_CARRIER",
    "SELECT_CARRIERS",
    "QueueOnSqlite",
    "claim_tasks",
    "enqueue",
    "release_claim",
    "start_claimed",
]

_KEY = "SELECT task_id, digest FROM idempotency_keys WHERE idempotency_key = ?"
_INSERT_KEY = "INSERT INTO idempotency_keys (idempotency_key, task_id, digest) VALUES (?, ?, ?)"
#: Beside the task it belongs to (migration 0008); OR REPLACE: an id is new when this runs.
INSERT_CARRIER = "INSERT OR REPLACE INTO trace_carriers (task_id, carrier) VALUES (?, ?)"
#: The carriers of some tasks (?: a JSON array of ids).
SELECT_CARRIERS = (
    "SELECT task_id, carrier FROM trace_carriers WHERE task_id IN (SELECT value FROM json_each(?))"
)
_SELECT = f"SELECT {', '.join(TASK_NAMES)} FROM tasks"

#: The claimable tasks in claim order. ?1 buckets (JSON or NULL: all), ?2 the
#: served names, ?3 the served [name, version] pairs (JSON), ?4 now, ?5 limit.
#: The partial index is named: it is already in claim order, so the scan stops
#: at the limit (the planner, without statistics, would sort every queued row).
_CLAIMABLE = (
    "SELECT task_id FROM tasks INDEXED BY tasks_claimable"
    " WHERE status = 'queued' AND owner IS NULL"
    " AND (bucket IS NULL OR ?1 IS NULL OR bucket IN (SELECT value FROM json_each(?1)))"
    " AND ((version IS NULL AND name IN (SELECT value FROM json_each(?2)))"
    "   OR (name, version) IN"
    "     (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?3)))"
    " AND (not_before IS NULL OR not_before <= ?4)"
    "{excluding}{pool}"
    " ORDER BY priority DESC, queued_at, task_id LIMIT ?5"
)
#: Only when a claim excludes tags (?6, a JSON array), so the common claim keeps its plan.
_EXCLUDING = (
    " AND NOT EXISTS (SELECT 1 FROM json_each(tags)"
    " WHERE value IN (SELECT value FROM json_each(?6)))"
)
#: Only for a pool's claim (?7, a JSON array): one of these tags must be on the task.
_POOL = (
    " AND EXISTS (SELECT 1 FROM json_each(tags) WHERE value IN (SELECT value FROM json_each(?7)))"
)
_CLAIM = _CLAIMABLE.format(excluding="", pool="")
_CLAIM_EXCLUDING = _CLAIMABLE.format(excluding=_EXCLUDING, pool="")
#: An aged claim's levels: the highest priorities present (one index seek each).
_LEVELS = (
    "WITH RECURSIVE levels(p, n) AS ("
    " SELECT (SELECT priority FROM tasks INDEXED BY tasks_claimable"
    " WHERE status = 'queued' AND owner IS NULL ORDER BY priority DESC LIMIT 1), 1"
    " UNION ALL SELECT (SELECT priority FROM tasks INDEXED BY tasks_claimable"
    " WHERE status = 'queued' AND owner IS NULL AND priority < levels.p"
    " ORDER BY priority DESC LIMIT 1), n + 1"
    f" FROM levels WHERE levels.p IS NOT NULL AND n < {AGED_LEVELS})"
    " SELECT p FROM levels WHERE p IS NOT NULL"
)
#: An aged claim's candidates at one level (?8), oldest first; ?6/?7 always bound.
_AGED = {
    pool: _CLAIMABLE.replace("SELECT task_id FROM", "SELECT task_id, priority, queued_at FROM")
    .replace(" ORDER BY", " AND priority = ?8 ORDER BY")
    .format(excluding=_EXCLUDING, pool=_POOL if pool else "")
    for pool in (False, True)
}
#: Every variant by (excluding, pool): the common claim keeps its own plan.
_CLAIMS = {
    (False, False): _CLAIM,
    (True, False): _CLAIM_EXCLUDING,
    (False, True): _CLAIMABLE.format(excluding="", pool=_POOL),
    (True, True): _CLAIMABLE.format(excluding=_EXCLUDING, pool=_POOL),
}
_TAKE = "UPDATE tasks SET owner = ? WHERE task_id = ? AND status = 'queued' AND owner IS NULL"


def enqueue_params(
    snapshot: TaskSnapshot,
    transitions: Sequence[Transition],
    trace_carrier: Mapping[str, str] | None,
    limit: int | None,
) -> tuple[Any, ...]:
    """The checked, encoded arguments of :func:`enqueue` after ``conn`` (bad input raises)."""
    check_enqueued(snapshot)
    row = rows.encode(rows.insert_row, snapshot, limit)
    check_transitions(transitions, snapshot.task_id)
    carrier = check_trace_carrier(trace_carrier)
    text = None if carrier is None else encode_trace_carrier(carrier)
    encoded = [rows.transition_row(t) for t in transitions]
    key = snapshot.idempotency_key
    return (row, encoded, snapshot.task_id, key, input_digest(snapshot), text)


def enqueue(
    conn: sqlite3.Connection,
    row: Sequence[Any],
    transitions: Sequence[Sequence[Any]],
    task_id: str,
    key: str | None,
    digest: str,
    carrier: str | None = None,
    facts: Sequence[tuple[str, str, str | None]] = (),
    *,
    now: int = 0,
    read_back: bool = True,
) -> tuple[bool, Any]:
    """``(True, snapshot)`` when inserted; ``(False, snapshot)`` when the key named a twin.

    The inserted snapshot is the row as stored, read back in this transaction
    (the caller needs no second read for its JSON forms); ``None`` when
    ``read_back`` is False (a schedule's fire counts what it inserted).

    ``carrier``: the encoded trace carrier, written beside the task when it is inserted;
    ``facts``: ``(name, payload JSON, key)`` of the task's first facts, likewise (sent at
    ``now``).
    """
    conn.execute("SAVEPOINT chongming_enqueue")
    try:
        if key is not None:
            found = conn.execute(_KEY, (key,)).fetchone()
            if found is not None:
                if found[1] != digest:
                    raise IdempotencyConflict(key, found[0])
                existing = conn.execute(f"{_SELECT} WHERE task_id = ?", (found[0],)).fetchone()
                if existing is not None:
                    conn.execute("RELEASE chongming_enqueue")
                    return False, snapshot_from_row(existing)
                conn.execute("DELETE FROM idempotency_keys WHERE idempotency_key = ?", (key,))
        try:
            conn.execute(INSERT_TASK, row)
        except sqlite3.IntegrityError:
            raise DuplicateTaskId(task_id) from None
        conn.executemany(INSERT_TRANSITION, transitions)
        if key is not None:
            conn.execute(_INSERT_KEY, (key, task_id, digest))
        if carrier is not None:
            conn.execute(INSERT_CARRIER, (task_id, carrier))
        if facts:
            conn.executemany(
                "INSERT INTO durable_facts (task_id, name, payload, key, sent_at)"
                " VALUES (?, ?, ?, ?, ?)",
                [(task_id, name, payload, key, now) for name, payload, key in facts],
            )
    except BaseException:
        conn.execute("ROLLBACK TO chongming_enqueue")
        conn.execute("RELEASE chongming_enqueue")
        raise
    conn.execute("RELEASE chongming_enqueue")
    if not read_back:
        return True, None
    stored = conn.execute(f"{_SELECT} WHERE task_id = ?", (task_id,)).fetchone()
    return True, snapshot_from_row(stored)


def claim_tasks(
    conn: sqlite3.Connection,
    owner: str,
    serves: dict[str, list[int | None]],
    buckets: list[int] | None,
    limit: int,
    exclude_tags: list[str],
    start_at: int | None = None,
    pool: list[str] | None = None,
    age_step: float | None = None,
    *,
    now: int,
) -> list[Any]:
    """Take up to ``limit`` claimable tasks for ``owner``, best first; their snapshots.

    ``start_at`` (microseconds): also move each ``queued -> starting`` as of
    then, in this transaction, and answer :class:`ClaimedTask` records.
    """
    if not serves:
        return []
    bucket_json = None if buckets is None else dump(sorted(buckets))
    pairs = [[name, v] for name, versions in serves.items() for v in versions if v is not None]
    params: tuple[Any, ...] = (bucket_json, dump(sorted(serves)), dump(pairs), now, limit)
    if age_step is not None:
        taken = _aged(conn, (*params, dump(exclude_tags), dump(pool)), pool, age_step, now, limit)
    else:
        sql = _CLAIMS[bool(exclude_tags), pool is not None]
        params += (dump(exclude_tags), dump(pool)) if pool is not None else ()
        if exclude_tags and pool is None:
            params += (dump(exclude_tags),)
        taken = [row[0] for row in conn.execute(sql, params).fetchall()]
    if not taken:
        return []
    if start_at is None:
        conn.executemany(_TAKE, [(owner, task_id) for task_id in taken])
    else:
        conn.executemany(_TAKE_STARTED, [(owner, start_at, task_id) for task_id in taken])
        conn.executemany(_RECORD_START, [(task_id, start_at) for task_id in taken])
    return _answer(conn, taken, start_at)


def start_claimed(
    conn: sqlite3.Connection, owner: str, pairs: list[tuple[str, int]], start_at: int
) -> list[ClaimedTask]:
    """Start what a plain claim gave ``owner`` and is still queued at its claimed version."""
    taken = [
        task_id
        for task_id, version in pairs
        if conn.execute(_START_HELD, (owner, start_at, task_id, version)).rowcount == 1
    ]
    if not taken:
        return []
    conn.executemany(_RECORD_START, [(task_id, start_at) for task_id in taken])
    answered: list[ClaimedTask] = _answer(conn, taken, start_at)
    return answered


def _answer(conn: sqlite3.Connection, taken: list[str], start_at: int | None) -> list[Any]:
    """The snapshots of ``taken`` in that order; started (``start_at``): with histories."""
    ids = (dump(taken),)
    found = conn.execute(f"{_SELECT} WHERE task_id IN (SELECT value FROM json_each(?))", ids)
    by_id = {snapshot.task_id: snapshot for snapshot in map(snapshot_from_row, found.fetchall())}
    if start_at is None:
        return [by_id[task_id] for task_id in taken]
    histories: dict[str, list[Transition]] = {task_id: [] for task_id in taken}
    for row in conn.execute(_HISTORIES, ids).fetchall():
        histories[row[0]].append(transition_from_row(row))
    return [
        ClaimedTask(snapshot=by_id[task_id], history=tuple(histories[task_id])) for task_id in taken
    ]


def _aged(
    conn: sqlite3.Connection,
    params: tuple[Any, ...],
    pool: list[str] | None,
    age_step: float,
    now: int,
    limit: int,
) -> list[str]:
    """The ids an aged claim takes: the oldest ``limit`` of each level, by effective priority.

    Within a level the oldest has waited longest, so the best ``limit`` overall
    are among the first ``limit`` of each level (the scan of each stops there).
    """
    step = age_step * 1e6  # queued_at and now are microseconds
    found: list[tuple[int, int, str]] = []
    for (level,) in conn.execute(_LEVELS).fetchall():
        for task_id, priority, queued_at in conn.execute(_AGED[pool is not None], (*params, level)):
            effective = priority + math.floor((now - queued_at) / step)
            found.append((-effective, queued_at, task_id))
    found.sort()
    return [task_id for _, _, task_id in found[:limit]]


#: A start after a park or a resume continues its attempt (chongming.state.attempts).
_CONTINUES = ", ".join(f"'{trigger}'" for trigger in sorted(CONTINUES_ATTEMPT))
_TAKE_STARTED = (
    "UPDATE tasks SET owner = ?1, status = 'starting', status_version = status_version + 1,"
    " attempt = attempt + CASE WHEN EXISTS (SELECT 1 FROM transitions AS q"
    " WHERE q.task_id = tasks.task_id AND q.version = tasks.status_version"
    f" AND q.trigger IN ({_CONTINUES})) THEN 0 ELSE 1 END, updated_at = ?2"
    " WHERE task_id = ?3 AND status = 'queued' AND owner IS NULL"
)
#: The same start of a task the claimer holds already (?4: the version it claimed).
_START_HELD = _TAKE_STARTED.replace("AND owner IS NULL", "AND owner = ?1 AND status_version = ?4")
_RECORD_START = (
    f"INSERT INTO transitions ({', '.join(TRANSITION_COLUMNS)})"
    " SELECT task_id, status_version, 'queued', 'starting', ?2,"
    f" '{Trigger.DISPATCH}', 'system', NULL, attempt FROM tasks WHERE task_id = ?1"
)
_HISTORIES = (
    f"SELECT {', '.join(TRANSITION_COLUMNS)} FROM transitions"
    " WHERE task_id IN (SELECT value FROM json_each(?)) ORDER BY task_id, version"
)


_RELEASE = (
    "UPDATE tasks SET owner = NULL WHERE task_id = ? AND owner = ?"
    " AND status = 'queued' AND status_version = ?"
)


def release_claim(conn: sqlite3.Connection, task_id: str, owner: str, version: int) -> bool:
    return conn.execute(_RELEASE, (task_id, owner, version)).rowcount == 1


class QueueOnSqlite(SqliteInternals, QueueStore, CarrierStore):
    """The port's queue and trace carriers: each decision one op in the writer's transaction."""

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> Enqueued:
        params = enqueue_params(snapshot, transitions, trace_carrier, self._limit)
        given = check_enqueue_facts(facts, snapshot.task_id, self._limit)
        if given and connection is not None:
            raise ConfigurationError("facts= cannot join the caller's transaction yet")
        if connection is not None:  # the caller's transaction (sqlite/transaction.py)
            # aiosqlite is imported only here, where the caller's connection is checked.
            from chongming.stores.sqlite.transaction import enqueue_in_transaction

            await self.open()  # the schema must exist before the caller's transaction uses it
            return await enqueue_in_transaction(connection, self._path, *params)
        encoded = [(fact.name, dump(fact.payload), fact.key) for fact in given]
        created, stored = await self._node_op("enqueue", *params, encoded)
        return Enqueued(snapshot=stored, created=created)

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
    ) -> list[TaskSnapshot]:
        check_claim(owner, serves, buckets, limit, exclude_tags, tags, age_step)
        plain = {name: list(versions) for name, versions in serves.items()}
        chosen = None if buckets is None else sorted(buckets)
        excluded = check_exclude_tags(exclude_tags)
        pool = check_pool_tags(tags)
        claimed: list[TaskSnapshot] = await self._node_op(
            "claim_tasks", owner, plain, chosen, limit, excluded, None, pool, age_step
        )
        return claimed

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
        at: datetime,
    ) -> list[ClaimedTask]:
        check_claim(owner, serves, buckets, limit, exclude_tags, tags, age_step)
        plain = {name: list(versions) for name, versions in serves.items()}
        chosen = None if buckets is None else sorted(buckets)
        excluded = check_exclude_tags(exclude_tags)
        start = rows.to_micros(at, "at")
        claimed: list[ClaimedTask] = await self._node_op(
            "claim_tasks",
            owner,
            plain,
            chosen,
            limit,
            excluded,
            start,
            check_pool_tags(tags),
            age_step,
        )
        return claimed

    async def start_claimed(
        self, owner: str, claimed: Sequence[TaskSnapshot], *, at: datetime
    ) -> list[ClaimedTask]:
        pairs = check_start_claimed(owner, claimed)
        start = rows.to_micros(at, "at")
        if not pairs:
            return []
        started: list[ClaimedTask] = await self._node_op("start_claimed", owner, pairs, start)
        return started

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        released: bool = await self._node_op("release_claim", task_id, owner, expect_version)
        return released

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        if not task_ids:
            return {}
        found = await self._read(SELECT_CARRIERS, (dump(sorted(set(task_ids))),))
        return {row[0]: carrier for row in found if (carrier := decode_trace_carrier(row[1]))}
