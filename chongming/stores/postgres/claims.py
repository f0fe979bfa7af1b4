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
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.checks import check_time
from chongming.stores.codec import STATUS_OF
from chongming.stores.granted import GrantAsk, GrantedClaim, admit_by_grants, check_grant_ask
from chongming.stores.postgres import rows
from chongming.stores.postgres.claim_sql import (
    COLUMNS,
    claim_sql,
    granting_sql,
    start_held_sql,
    started_by_sql,
    started_sql,
)
from chongming.stores.postgres.driver import is_connection_error
from chongming.stores.postgres.rates import Grants
from chongming.stores.queue import (
    ClaimedTask,
    Serves,
    check_claim,
    check_exclude_tags,
    check_pool_tags,
    check_start_claimed,
)
from chongming.stores.rates import RateGrant

__all__ = ["Claims"]

_QUEUED, _STARTING = TaskStatus.QUEUED, TaskStatus.STARTING

Runner = Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


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
        self._held = f"SELECT {COLUMNS} FROM {schema}.tasks WHERE owner = $1 AND status = 'queued'"
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
