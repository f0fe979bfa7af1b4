"""The SQL of PostgreSQL claims: which rows a claim picks, and how a start is written.

Text only, built once per schema (:class:`~chongming.stores.postgres.claims.Claims`
runs them): the pick (``FOR UPDATE SKIP LOCKED`` in claim order, aged or
not, for a pool or not), the update that takes the picked rows by address,
the ``starting`` transition a started claim writes in the same statement,
and the history a claim answers with (none read for a task claimed at its
first version).
"""

from __future__ import annotations

from chongming.state.attempts import CONTINUES_ATTEMPT
from chongming.state.triggers import Trigger
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS
from chongming.stores.queue import AGED_LEVELS

__all__ = [
    "COLUMNS",
    "claim_sql",
    "granting_sql",
    "start_held_sql",
    "started_by_sql",
    "started_sql",
]

#: The snapshot columns, in the order rows.py reads them.
COLUMNS = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)
_RETURNING = ", ".join(f"t.{name}" for name, _ in SNAPSHOT_COLUMNS)
_HISTORY = ("version", "from_status", "to_status", "at", "trigger", "actor", "reason", "attempt")
_HISTORY_TYPES = ("int", "text", "text", "timestamptz", "text", "text", "text", "int")
#: The history columns of a row that needs none read (typed, for the UNION beside them).
_NO_HISTORY = ", ".join(
    f"NULL::{kind}[] AS h_{column}" for column, kind in zip(_HISTORY, _HISTORY_TYPES, strict=True)
)
#: A start after a park or a resume continues its attempt (chongming.state.attempts).
_CONTINUES = ", ".join(f"'{trigger}'" for trigger in sorted(CONTINUES_ATTEMPT))


#: What a claim's pick answers of each row it locks, for the update that follows: the
#: row's address. The update joins its rows by it (``_BY_ROW``): one fetch per row
#: (a Tid Scan). Joined by task id, the planner (which cannot tell a claim's few rows
#: from many) probes the primary key per row or, on a smaller table, hashes a scan
#: of the whole table (seen on 3,000 rows in a drain; 3 of the 5 ms of a claim of
#: 128 on 10,000 rows at the default random_page_cost). A locked row keeps its
#: address until the statement ends; the task id is compared too.
_ROW = ", ctid AS row_at"
_BY_ROW = "t.ctid = chosen.row_at AND t.task_id = chosen.task_id"

#: What a granted claim reads of each row it locks, to decide its grants.
_GRANTING = ", status_version, name, version, tags"
#: A pick that writes nothing still names ``$1`` (the claimer), so every claim
#: statement takes the same parameters.
_CLAIMER = ", $1::text AS claimer"


def _chosen(
    schema: str,
    exclude: int | None,
    *,
    versions: bool = False,
    pool: int | None = None,
    granting: bool = False,
) -> str:
    """The claimable rows, best first, locked; ``exclude``/``pool``: the parameters of the tags
    a task must not / must (one of) carry."""
    excluding = "" if exclude is None else f" AND NOT (tags && ${exclude}::text[])"
    if pool is not None:
        excluding += f" AND tags && ${pool}::text[]"
    columns = _GRANTING + _CLAIMER if granting else ", status_version" if versions else ""
    if not granting:
        columns += _ROW
    return (
        f"SELECT task_id{columns} FROM {schema}.tasks"
        " WHERE status = 'queued' AND owner IS NULL"
        " AND (bucket IS NULL OR $2::int[] IS NULL OR bucket = ANY($2::int[]))"
        " AND ((version IS NULL AND name = ANY($3::text[]))"
        "   OR (name, version) IN (SELECT * FROM unnest($4::text[], $5::int[])))"
        f" AND (not_before IS NULL OR not_before <= now()){excluding}"
        ' ORDER BY priority DESC, queued_at, task_id COLLATE "C"'
        " LIMIT $6 FOR UPDATE SKIP LOCKED"
    )


def _aged(schema: str, first: int, *, versions: bool = False, granting: bool = False) -> str:
    """An aged claim's rows: ``$first`` excluded tags, ``+1`` a pool's tags (or NULL),
    ``+2`` the age step in seconds.

    Within one priority level the oldest task has waited longest, so the best
    ``$6`` by effective priority are among the first ``$6`` of each level: the
    highest levels present are found by index seeks (a recursive walk down
    the claim index), each level's oldest are read by the same index and
    locked, and only those are ranked. One level (the common case) costs two
    seeks more than the plain claim.
    """
    exclude, pool, age = first, first + 1, first + 2
    tasks = f"{schema}.tasks"
    open_rows = "status = 'queued' AND owner IS NULL"
    columns = _GRANTING if granting else ", status_version" if versions else ""
    outer = columns.replace(", ", ", c.") + (_CLAIMER if granting else ", c.row_at")
    return (
        f"SELECT c.task_id{outer} FROM ("
        f"WITH RECURSIVE levels(p, n) AS ((SELECT priority, 1 FROM {tasks} WHERE {open_rows}"
        " ORDER BY priority DESC LIMIT 1) UNION ALL"
        f" SELECT (SELECT t.priority FROM {tasks} AS t"
        " WHERE t.status = 'queued' AND t.owner IS NULL AND t.priority < l.p"
        " ORDER BY t.priority DESC LIMIT 1), l.n + 1"
        f" FROM levels AS l WHERE l.p IS NOT NULL AND l.n < {AGED_LEVELS})"
        " SELECT p FROM levels WHERE p IS NOT NULL) AS lv"
        " CROSS JOIN LATERAL (SELECT task_id, status_version, priority, queued_at,"
        f" name, version, tags{_ROW}"
        f" FROM {tasks} WHERE {open_rows} AND priority = lv.p"
        " AND (bucket IS NULL OR $2::int[] IS NULL OR bucket = ANY($2::int[]))"
        " AND ((version IS NULL AND name = ANY($3::text[]))"
        "   OR (name, version) IN (SELECT * FROM unnest($4::text[], $5::int[])))"
        " AND (not_before IS NULL OR not_before <= now())"
        f" AND NOT (tags && ${exclude}::text[])"
        f" AND (${pool}::text[] IS NULL OR tags && ${pool}::text[])"
        ' ORDER BY queued_at, task_id COLLATE "C" LIMIT $6 FOR UPDATE SKIP LOCKED) AS c'
        f" ORDER BY c.priority + floor(extract(epoch FROM now() - c.queued_at) / ${age}::float8)"
        ' DESC, c.queued_at, c.task_id COLLATE "C" LIMIT $6'
    )


def _history_of(schema: str, alias: str, *, where: str = "") -> str:
    """Stored transitions of ``alias.task_id`` as one array per column, by version."""
    arrays = ", ".join(f"array_agg(tr.{c} ORDER BY tr.version) AS h_{c}" for c in _HISTORY)
    return (
        f" LEFT JOIN LATERAL (SELECT {arrays} FROM {schema}.transitions AS tr"
        f" WHERE tr.task_id = {alias}.task_id{where}) AS h ON true"
    )


def claim_sql(schema: str, *, exclude: bool, pool: bool = False, aged: bool = False) -> str:
    """A plain claim: owner only. ``$7``: excluded tags, ``$8`` a pool's tags (each variant
    has its own plan); aged: ``$7``-``$9`` as :func:`_aged` reads them."""
    chosen = (
        _aged(schema, 7)
        if aged
        else _chosen(schema, 7 if exclude else None, pool=8 if pool else None)
    )
    return (
        f"WITH chosen AS ({chosen})"
        f" UPDATE {schema}.tasks AS t SET owner = $1 FROM chosen"
        f" WHERE {_BY_ROW} RETURNING {_RETURNING}"
    )


def started_sql(schema: str, *, exclude: bool, pool: bool = False, aged: bool = False) -> str:
    """A started claim: ``$7`` at, ``$8`` excluded tags, ``$9`` a pool's tags.

    The last stored transition (at the version the task was claimed at) is
    read by its key, beside the update: its trigger decides whether the start
    continues an attempt, and it comes back with the row (``l_*``). The rest
    of the history is read only for a task that has one (claimed above
    version 1: requeued, retried, parked, resumed); a fresh enqueued task's
    history is that one transition and the start this statement writes.
    """
    chosen = (
        _aged(schema, 8, versions=True)
        if aged
        else _chosen(schema, 8 if exclude else None, versions=True, pool=9 if pool else None)
    )
    return _start(schema, chosen, at="$7")


def start_held_sql(schema: str, *, owned: bool = True) -> str:
    """Start what a plain claim of ``$1`` holds: ``$2`` ids, ``$3`` claimed versions, ``$4`` at.

    ``owned=False``: rows this transaction locked unowned (a granted claim's).
    """
    held_by = "t.owner = $1" if owned else "t.owner IS NULL"
    held = (
        f"SELECT t.task_id, t.status_version FROM {schema}.tasks AS t"
        " JOIN unnest($2::text[], $3::integer[]) AS c (task_id, version)"
        " ON t.task_id = c.task_id"
        f" WHERE {held_by} AND t.status = 'queued' AND t.status_version = c.version"
        " FOR UPDATE OF t"
    )
    return _start(schema, held, at="$4", by_row=False)


def granting_sql(schema: str, *, exclude: bool, pool: bool = False, aged: bool = False) -> str:
    """A granted claim's pick: the claimable rows, locked, with what grants are decided by.

    ``$7`` excluded tags, ``$8`` a pool's tags; aged: ``$7``-``$9`` as :func:`_aged`."""
    if aged:
        return _aged(schema, 7, granting=True)
    return _chosen(schema, 7 if exclude else None, pool=8 if pool else None, granting=True)


def _start(schema: str, chosen: str, *, at: str, by_row: bool = True) -> str:
    """Move the ``chosen`` rows (task_id, status_version[, row_at]) to ``starting`` at ``at``.

    ``by_row=False``: rows a plain claim already holds, joined by task id. Joined
    by address, a row that changed after the statement's snapshot and before
    its lock (a heartbeat) would be skipped (the address is that of a version
    the snapshot does not see): harmless for a claim of unowned rows (the task
    stays queued for the next claim), not for rows their claimer expects started.
    """
    joined = _BY_ROW if by_row else "t.task_id = chosen.task_id"
    last = ", ".join(f"q.{c} AS l_{c}" for c in _HISTORY)
    history = ", ".join(f"h.h_{c}" for c in _HISTORY)
    return (
        f"WITH chosen AS ({chosen}),"
        f" started AS (UPDATE {schema}.tasks AS t SET owner = $1, status = 'starting',"
        " status_version = t.status_version + 1,"
        f" attempt = t.attempt + CASE WHEN q.trigger IN ({_CONTINUES}) THEN 0 ELSE 1 END,"
        f" updated_at = {at}::timestamptz"
        # LIMIT 1 keeps it a probe of the key per row (never a scan of the whole table).
        f" FROM chosen LEFT JOIN LATERAL (SELECT {', '.join(_HISTORY)}"
        f" FROM {schema}.transitions AS q WHERE q.task_id = chosen.task_id"
        " AND q.version = chosen.status_version LIMIT 1)"
        " AS q ON true"
        f" WHERE {joined} RETURNING {_RETURNING}, {last}),"
        f" recorded AS (INSERT INTO {schema}.transitions (task_id, {', '.join(_HISTORY)})"
        f" SELECT task_id, status_version, 'queued', 'starting', {at}::timestamptz,"
        f" '{Trigger.DISPATCH}', 'system', NULL, attempt FROM started)"
        # A task claimed at its first version (a fresh one): its history is the last
        # transition and the start, both known here, so its row meets no history read.
        f" SELECT t.*, {_NO_HISTORY} FROM started AS t WHERE t.status_version <= 2"
        f" UNION ALL SELECT t.*, {history} FROM started AS t"
        + _history_of(schema, "t", where=" AND tr.version <> t.status_version - 1")
        + " WHERE t.status_version > 2"
    )


def started_by_sql(schema: str) -> str:
    """The tasks a started claim of ``$1`` at ``$2`` (any of) took, with whole histories."""
    history = ", ".join(f"h.h_{c}" for c in _HISTORY)
    return (
        f"SELECT {_RETURNING}, {history} FROM {schema}.tasks AS t{_history_of(schema, 't')}"
        " WHERE t.owner = $1 AND t.status = 'starting' AND t.updated_at = ANY($2::timestamptz[])"
    )
