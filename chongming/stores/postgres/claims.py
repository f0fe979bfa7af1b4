"""Claims on PostgreSQL: one statement takes the best claimable rows with SKIP LOCKED.

``FOR UPDATE SKIP LOCKED`` means two workers never wait on or take the same
row. A plain claim writes the claimer as owner. A *started* claim
(:meth:`TaskStore.claim_started`) also moves each row ``queued -> starting``
(version and attempt + 1, ``updated_at`` = the claimer's ``at``), inserts
that transition and answers with each task's stored history, all in the same
statement: the start is durable before the claimer sees the task, and
adopting it costs no further round trip.

After a connection error the outcome is unknown. A plain claim is answered
with every queued task the claimer holds (it skips those it already runs). A
started claim is recognised by its ``at``: the rows the claimer holds at
``starting`` with exactly that ``updated_at`` (nobody else writes a task
between its claim and its adoption). If even that read fails, the claim is
remembered and resolved before the claimer's next one, so a committed claim
is never stranded while its claimer lives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from chongming.errors import StoreError
from chongming.state.attempts import CONTINUES_ATTEMPT
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.checks import check_time
from chongming.stores.codec import STATUS_OF
from chongming.stores.granted import GrantAsk, GrantedClaim, admit_by_grants, check_grant_ask
from chongming.stores.postgres import rows
from chongming.stores.postgres.driver import is_connection_error
from chongming.stores.postgres.rates import Grants
from chongming.stores.postgres.sql import SNAPSHOT_COLUMNS
from chongming.stores.queue import (
    AGED_LEVELS,
    ClaimedTask,
    Serves,
    check_claim,
    check_exclude_tags,
    check_pool_tags,
    check_start_claimed,
)
from chongming.stores.rates import RateGrant

__all__ = ["Claims"]

Runner = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]

_COLUMNS = ", ".join(name for name, _ in SNAPSHOT_COLUMNS)
_RETURNING = ", ".join(f"t.{name}" for name, _ in SNAPSHOT_COLUMNS)
_HISTORY = ("version", "from_status", "to_status", "at", "trigger", "actor", "reason", "attempt")
_HISTORY_TYPES = ("int", "text", "text", "timestamptz", "text", "text", "text", "int")
#: The history columns of a row that needs none read (typed, for the UNION beside them).
_NO_HISTORY = ", ".join(
    f"NULL::{kind}[] AS h_{column}" for column, kind in zip(_HISTORY, _HISTORY_TYPES, strict=True)
)
_QUEUED, _STARTING = TaskStatus.QUEUED, TaskStatus.STARTING
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


class Claims:
    """Plain and started claims for one schema; the store supplies the I/O."""

    def __init__(
        self, schema: str, *, read: Runner, once: Runner, fail: Callable[[BaseException, str], Any]
    ) -> None:
        self._read = read
        self._once = once
        self._fail = fail
        self._claim = claim_sql(schema, exclude=False)
        self._claim_excluding = claim_sql(schema, exclude=True)
        self._started = started_sql(schema, exclude=False)
        self._started_excluding = started_sql(schema, exclude=True)
        #: A pool's claims (tags=): excluded tags always bound, possibly empty.
        self._claim_pool = claim_sql(schema, exclude=True, pool=True)
        self._started_pool = started_sql(schema, exclude=True, pool=True)
        #: Aged claims (age_step=): excluded tags, a pool's tags (or NULL) and the step bound.
        self._claim_aged = claim_sql(schema, exclude=True, aged=True)
        self._started_aged = started_sql(schema, exclude=True, aged=True)
        self._started_by = started_by_sql(schema)
        self._start_held = start_held_sql(schema)
        #: A granted claim: its pick (plain, excluding, pool, aged), its start, its grants.
        self._granting = {
            (exclude, pool, aged): granting_sql(schema, exclude=exclude, pool=pool, aged=aged)
            for exclude, pool, aged in (
                (False, False, False),
                (True, False, False),
                (True, True, False),
                (True, False, True),
            )
        }
        self._start_granted = start_held_sql(schema, owned=False)
        self._grants = Grants(schema)
        self._held = f"SELECT {_COLUMNS} FROM {schema}.tasks WHERE owner = $1 AND status = 'queued'"
        #: owner -> the ``at`` of started claims whose outcome is still unknown.
        self._unresolved: dict[str, set[datetime]] = {}

    async def claim(
        self,
        owner: str,
        serves: Serves,
        buckets: Collection[int] | None,
        limit: int,
        exclude_tags: Collection[str],
        tags: Collection[str] | None = None,
        age_step: float | None = None,
    ) -> list[TaskSnapshot]:
        check_claim(owner, serves, buckets, limit, exclude_tags, tags, age_step)
        args = _arguments(owner, serves, buckets, limit)
        sql = self._claim
        if age_step is not None:
            sql = self._claim_aged
            args += [check_exclude_tags(exclude_tags), check_pool_tags(tags), float(age_step)]
        elif tags is not None:
            sql = self._claim_pool
            args += [check_exclude_tags(exclude_tags), check_pool_tags(tags)]
        elif exclude_tags:
            sql = self._claim_excluding
            args.append(check_exclude_tags(exclude_tags))
        what = f"claiming tasks for {owner!r}"
        try:
            found = await self._once(what, lambda c: c.fetch(sql, *args))
        except StoreError:
            raise
        except Exception as error:
            if not is_connection_error(error):
                self._fail(error, what)
            found = await self._read(what, lambda c: c.fetch(self._held, owner))
        claimed = [rows.snapshot_from_row(row) for row in found]
        claimed.sort(key=_claim_order)
        return claimed

    async def claim_started(
        self,
        owner: str,
        serves: Serves,
        buckets: Collection[int] | None,
        limit: int,
        exclude_tags: Collection[str],
        at: datetime,
        tags: Collection[str] | None = None,
        age_step: float | None = None,
    ) -> list[ClaimedTask]:
        check_claim(owner, serves, buckets, limit, exclude_tags, tags, age_step)
        at = check_time(at, "at")
        what = f"claiming and starting tasks for {owner!r}"
        recovered = await self._resolve(owner, what)
        args: list[Any] = [*_arguments(owner, serves, buckets, limit), at]
        sql = self._started
        if age_step is not None:
            sql = self._started_aged
            args += [check_exclude_tags(exclude_tags), check_pool_tags(tags), float(age_step)]
        elif tags is not None:
            sql = self._started_pool
            args += [check_exclude_tags(exclude_tags), check_pool_tags(tags)]
        elif exclude_tags:
            sql = self._started_excluding
            args.append(check_exclude_tags(exclude_tags))
        try:
            found = await self._once(what, lambda c: c.fetch(sql, *args))
        except StoreError:
            raise
        except Exception as error:
            if not is_connection_error(error):
                self._fail(error, what)
            return await self._lost(owner, at, what, recovered)
        claimed = [_claimed(row, appended=False) for row in found]
        claimed.sort(key=lambda c: _claim_order(c.snapshot))
        return recovered + claimed

    async def start_claimed(
        self, owner: str, claimed: Sequence[TaskSnapshot], at: datetime
    ) -> list[ClaimedTask]:
        pairs = check_start_claimed(owner, claimed)
        at = check_time(at, "at")
        what = f"starting tasks claimed by {owner!r}"
        recovered = await self._resolve(owner, what)
        if not pairs:
            return recovered
        ids, versions = [p[0] for p in pairs], [p[1] for p in pairs]
        try:
            found = await self._once(
                what, lambda c: c.fetch(self._start_held, owner, ids, versions, at)
            )
        except StoreError:
            raise
        except Exception as error:
            if not is_connection_error(error):
                self._fail(error, what)
            return await self._lost(owner, at, what, recovered)
        order = {task_id: index for index, task_id in enumerate(ids)}
        started = [_claimed(row, appended=False) for row in found]
        started.sort(key=lambda c: order[c.snapshot.task_id])
        return recovered + started

    async def claim_granted(
        self,
        owner: str,
        serves: Serves,
        buckets: Collection[int] | None,
        limit: int,
        exclude_tags: Collection[str],
        at: datetime,
        tags: Collection[str] | None,
        age_step: float | None,
        grants: GrantAsk,
    ) -> GrantedClaim:
        """One transaction: lock the candidates, take the grants, start the granted.

        A refused row is never written (its lock ends with the transaction);
        a started one is written once. After a connection error the outcome is
        resolved by ``at`` like a started claim's (the grants may be lost:
        under-use, never excess).
        """
        ask = check_grant_ask(grants)
        check_claim(owner, serves, buckets, limit, exclude_tags, tags, age_step)
        at = check_time(at, "at")
        what = f"claiming granted tasks for {owner!r}"
        recovered = await self._resolve(owner, what)
        args: list[Any] = _arguments(owner, serves, buckets, limit)
        if age_step is not None:
            key = (True, False, True)
            args += [check_exclude_tags(exclude_tags), check_pool_tags(tags), float(age_step)]
        elif tags is not None:
            key = (True, True, False)
            args += [check_exclude_tags(exclude_tags), check_pool_tags(tags)]
        elif exclude_tags:
            key = (True, False, False)
            args.append(check_exclude_tags(exclude_tags))
        else:
            key = (False, False, False)
        pick = self._granting[key]

        def tags_of(row: Any) -> frozenset[str]:
            return ask.tags_of(row["name"], row["version"], frozenset(row["tags"] or ()))

        async def work(conn: Any) -> tuple[list[Any], dict[str, RateGrant], int]:
            async with conn.transaction():
                candidates = await conn.fetch(pick, *args)

                async def take(tag: str, want: int) -> RateGrant:
                    return await self._grants.take(conn, tag, "", want)

                passing, refused, decided = await admit_by_grants(
                    candidates, tags_of, ask.limited, take
                )
                if not passing:
                    return [], decided, len(refused)
                ids = [row["task_id"] for row in passing]
                versions = [row["status_version"] for row in passing]
                found = await conn.fetch(self._start_granted, owner, ids, versions, at)
                return list(found), decided, len(refused)

        try:
            found, decided, refused = await self._once(what, work)
        except StoreError:
            raise
        except Exception as error:
            if not is_connection_error(error):
                self._fail(error, what)
            started = await self._lost(owner, at, what, recovered)
            return GrantedClaim(started=started, grants={}, refused=0)
        claimed = [_claimed(row, appended=False) for row in found]
        claimed.sort(key=lambda c: _claim_order(c.snapshot))
        return GrantedClaim(started=recovered + claimed, grants=decided, refused=refused)

    async def _lost(
        self, owner: str, at: datetime, what: str, recovered: list[ClaimedTask]
    ) -> list[ClaimedTask]:
        """A start at ``at`` whose answer was lost: what it took, read back by ``at``.

        If even that read fails, the start stays unresolved for the next call
        (and what earlier ones were found to have taken is answered now).
        """
        self._unresolved.setdefault(owner, set()).add(at)
        try:
            return recovered + await self._resolve(owner, what)
        except StoreError:
            if recovered:
                return recovered
            raise

    async def _resolve(self, owner: str, what: str) -> list[ClaimedTask]:
        """What earlier started claims of ``owner`` with an unknown outcome took (see above)."""
        pending = self._unresolved.get(owner)
        if not pending:
            return []
        ats = sorted(pending)
        found = await self._read(what, lambda c: c.fetch(self._started_by, owner, ats))
        pending.difference_update(ats)  # read: what they took (if anything) is in ``found``
        if not pending:
            del self._unresolved[owner]
        claimed = [_claimed(row, appended=True) for row in found]
        claimed.sort(key=lambda c: _claim_order(c.snapshot))
        return claimed


def _arguments(
    owner: str, serves: Serves, buckets: Collection[int] | None, limit: int
) -> list[Any]:
    """``$1``..``$6`` of every claim statement."""
    pairs = [(n, v) for n, versions in serves.items() for v in versions if v is not None]
    return [
        owner,
        None if buckets is None else sorted(buckets),
        sorted(serves),
        [n for n, _ in pairs],
        [v for _, v in pairs],
        limit,
    ]


def _claim_order(task: TaskSnapshot) -> tuple[int, datetime, str]:
    return (-task.priority, task.queued_at or task.created_at, task.task_id)


def _claimed(row: Any, *, appended: bool) -> ClaimedTask:
    """A started row and its history; ``appended``: the arrays hold all of it, start included.

    Otherwise the arrays (if any) hold the transitions before the last one,
    the ``l_*`` columns the last one, and the start is the one the claim wrote.
    """
    snapshot = rows.snapshot_from_row(row)
    task_id = snapshot.task_id
    history: list[Transition] = []
    versions = row["h_version"]
    if versions is not None:
        columns = zip(
            versions,
            row["h_from_status"],
            row["h_to_status"],
            row["h_at"],
            row["h_trigger"],
            row["h_actor"],
            row["h_reason"],
            row["h_attempt"],
            strict=True,
        )
        for version, source, target, at, trigger, actor, reason, attempt in columns:
            history.append(
                Transition(
                    task_id=task_id,
                    version=version,
                    from_status=STATUS_OF[source],
                    to_status=STATUS_OF[target],
                    at=at,
                    trigger=trigger,
                    actor=actor,
                    reason=reason,
                    attempt=attempt,
                )
            )
    if appended:
        return ClaimedTask(snapshot=snapshot, history=tuple(history))
    if row["l_version"] is not None:
        history.append(
            Transition(
                task_id=task_id,
                version=row["l_version"],
                from_status=STATUS_OF[row["l_from_status"]],
                to_status=STATUS_OF[row["l_to_status"]],
                at=row["l_at"],
                trigger=row["l_trigger"],
                actor=row["l_actor"],
                reason=row["l_reason"],
                attempt=row["l_attempt"],
            )
        )
        if len(history) > 1 and history[-2].version > history[-1].version:
            history.sort(key=_version)  # a transition stored ahead of the row (never written so)
    history.append(
        Transition(
            task_id=task_id,
            version=snapshot.status_version,
            from_status=_QUEUED,
            to_status=_STARTING,
            at=snapshot.updated_at,
            trigger=Trigger.DISPATCH,
            actor="system",
            reason=None,
            attempt=snapshot.attempt,
        )
    )
    return ClaimedTask(snapshot=snapshot, history=tuple(history))


def _version(transition: Transition) -> int:
    return transition.version
