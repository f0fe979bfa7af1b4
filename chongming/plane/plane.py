"""``ControlPlane``: what a controller with a store adds to it.

Write-through of every transition, commands from other processes, this
process's node lease, and reconcile. The controller composes one when given
a store; its host calls :meth:`record` on every transition. A controller
becomes a *node* — registered, leased, claiming commands — on its first
submit: a pure query client (``chongming ps``) never does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any

from chongming.background import BackgroundTask
from chongming.clock import SYSTEM_CLOCK, Clock, to_datetime
from chongming.errors import StoreClosed, StoreError, VersionConflict
from chongming.plane.commands import Apply, CommandPoller
from chongming.plane.failures import PersistFailures
from chongming.plane.node import NodeLease
from chongming.plane.progress import ProgressWriter
from chongming.plane.reconcile import (
    RESUMABLE,
    ReconcileEntry,
    ReconcileOutcome,
    ReconcileReport,
    lost_write,
    parked_detail,
    plan_reconcile,
    requeue_retry_write,
    resume_write,
    resumes_so_far,
)
from chongming.plane.writethrough import WriteThrough
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import ACTIVE_STATUSES, TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from chongming.stores.nodes import NodeInfo, NodeRecord
from chongming.stores.writes import StateWrite, WriteOutcome

__all__ = ["ControlPlane"]

_log = logging.getLogger("chongming.control")


class ControlPlane:
    """One controller's link to a shared store."""

    def __init__(
        self,
        store: TaskStore,
        *,
        owner: str,
        num_buckets: int,
        owned_buckets: frozenset[int] | None,
        apply_command: Apply,
        on_let_go: Callable[[Any, str], None],
        live_runs: Callable[[], Iterable[Any]],
        poll_interval: float,
        lease_ttl: float,
        reconcile_interval: float | None,
        version: str,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.owner = owner
        self.owned_buckets = owned_buckets
        self._clock = clock  # the controller's: what a periodic reconcile's transitions carry
        self.writer = WriteThrough(store, on_let_go=on_let_go, clock=clock)
        self.commands = CommandPoller(
            store,
            owner=owner,
            apply=apply_command,
            poll_interval=poll_interval,
            lease_seconds=max(poll_interval * 5, 5.0),
        )
        self.node = NodeLease(
            store,
            owner=owner,
            num_buckets=num_buckets,
            owned_buckets=owned_buckets,
            ttl=lease_ttl,
            version=version,
        )
        self.progress = ProgressWriter(store, live_runs, interval=poll_interval)
        self._live_runs = live_runs
        self.reconcile_interval = reconcile_interval
        #: A worker's registrations: the ``max_resumes`` of a durable task by name and
        #: version, ``None`` for one not durable (or not registered) here. Reconcile asks
        #: it for a task with no durable run yet (its worker died before its first
        #: attempt began): that task is durable all the same, and is resumed.
        self.max_resumes_of: Callable[[str, int | None], int | None] | None = None
        #: Called with each task a reconcile ended (``lost``, or ``failed`` past its
        #: resumes) and its status, once written: its unfinished children are stopped.
        self.on_ended: Callable[[str, TaskStatus], Awaitable[None]] | None = None
        self._reconciler = BackgroundTask("chongming:reconcile")
        self._becoming: asyncio.Lock | None = None

    async def start(self) -> None:
        """Connect (a store whose schema is newer than this code fails here) and start writing."""
        await self.store.open()
        self.writer.start()
        self._becoming = asyncio.Lock()
        if self.reconcile_interval is not None:
            interval = self.reconcile_interval
            self._reconciler.start(lambda: self._reconcile_forever(interval))

    async def become_node(self) -> None:
        """Register this node and claim its commands (first submit; idempotent, cheap after)."""
        if self.node.registered:
            return
        assert self._becoming is not None
        async with self._becoming:
            if not self.node.registered:
                await self.node.register()
                if self.node.took_over is not None:
                    await self._judge_predecessor(self.node.took_over)
                self.commands.start()
                self.progress.start()

    async def _judge_predecessor(self, old: NodeInfo) -> None:
        """Reconcile what the process whose lease this node took over held under its name.

        Its tasks carry this owner name, and the lease on the name is live
        again (this node's), so no reconcile would ever judge them: they would
        stay ``running`` with nobody running them. They are judged before this
        node claims anything, as a dead owner's are: a durable attempt is
        resumed, an unstarted claim goes back to the queue, the rest is lost.
        """
        held_here = {run.task_id for run in self._live_runs()}
        query = TaskQuery(statuses=ACTIVE_STATUSES, owner=self.owner)
        mine = [s for s in await self.store.query(query) if s.task_id not in held_here]
        if not mine:
            return
        nodes = {record.info.owner: record for record in await self.store.nodes()}
        why = f"its process (pid {old.pid} on {old.host}) is gone; its lease was taken over"
        report = await self._judge(
            mine,
            nodes,
            gone={self.owner: why},
            dry_run=False,
            reason="the lease of this owner name was taken over from a process that is gone",
            actor=f"reconcile:{self.owner}",
            at=to_datetime(self._clock.time()),
        )
        _log.warning(
            "owner %r: judged %d task(s) its gone predecessor held: %s",
            self.owner,
            len(report.entries),
            ", ".join(f"{e.task_id} {e.outcome.value}" for e in report.entries),
        )

    def failures(self) -> PersistFailures:
        return self.writer.failures()

    async def reconcile(
        self, *, dry_run: bool, reason: str | None, actor: str, at: datetime
    ) -> ReconcileReport:
        """Judge the unfinished tasks of owned buckets by their owners' leases (store clock)."""
        nodes = {record.info.owner: record for record in await self.store.nodes()}
        snapshots = await self.store.query(TaskQuery(statuses=ACTIVE_STATUSES))
        return await self._judge(
            snapshots, nodes, gone=None, dry_run=dry_run, reason=reason, actor=actor, at=at
        )

    async def _judge(
        self,
        snapshots: list[TaskSnapshot],
        nodes: dict[str, NodeRecord],
        *,
        gone: dict[str, str] | None,
        dry_run: bool,
        reason: str | None,
        actor: str,
        at: datetime,
    ) -> ReconcileReport:
        by_id = {snapshot.task_id: snapshot for snapshot in snapshots}
        entries = plan_reconcile(snapshots, nodes, owned_buckets=self.owned_buckets, gone=gone)
        entries = await self._requeue(
            entries, by_id, dry_run=dry_run, reason=reason, actor=actor, at=at
        )
        entries = await self._explain_parked(entries, by_id)
        lost = [entry for entry in entries if entry.outcome is ReconcileOutcome.LOST]
        resumable = await self._durable_plans(lost, by_id)
        if dry_run:
            entries = [_as_planned(entry, resumable.get(entry.task_id)) for entry in entries]
            return ReconcileReport(dry_run=True, at=at, entries=tuple(entries))
        writes = []
        settled: dict[str, ReconcileEntry] = {}
        for entry in lost:
            snapshot = by_id[entry.task_id]
            plan = resumable.get(entry.task_id)
            if plan is None:
                moved, transition = lost_write(
                    snapshot, at=at, actor=actor, reason=reason, detail=entry.detail
                )
                transitions: tuple[Transition, ...] = (transition,)
            else:
                resumes, max_resumes = plan
                moved, transitions = resume_write(
                    snapshot,
                    resumes=resumes,
                    max_resumes=max_resumes,
                    at=at,
                    actor=actor,
                    reason=reason,
                    detail=entry.detail,
                )
                settled[entry.task_id] = _as_planned(entry, plan)
            writes.append(
                StateWrite(
                    snapshot=moved,
                    transitions=transitions,
                    expect_version=snapshot.status_version,
                )
            )
        results = await self.store.apply_writes(writes) if writes else []
        for entry, result in zip(lost, results, strict=True):
            if result.outcome is WriteOutcome.WRITTEN:
                continue
            if result.outcome is WriteOutcome.FAILED:
                raise result.error or StoreError("the store refused a reconcile write")
            settled[entry.task_id] = ReconcileEntry(
                task_id=entry.task_id,
                was=entry.was,
                outcome=ReconcileOutcome.LET_GO,
                owner=entry.owner,
                detail="the task moved on meanwhile (its owner came back?): left as it is",
            )
        ended = self.on_ended
        if ended is not None:
            for write, result in zip(writes, results, strict=True):
                moved = write.snapshot
                if result.outcome is WriteOutcome.WRITTEN and moved.status.is_terminal:
                    await ended(moved.task_id, moved.status)
        final = tuple(settled.get(entry.task_id, entry) for entry in entries)
        return ReconcileReport(dry_run=False, at=at, entries=final)

    async def _durable_plans(
        self, lost: list[ReconcileEntry], by_id: dict[str, TaskSnapshot]
    ) -> dict[str, tuple[int, int]]:
        """Lost durable attempts that may hand their task back: id -> (resumes so far, max)."""
        candidates = [e.task_id for e in lost if by_id[e.task_id].status in RESUMABLE]
        if not candidates:
            return {}
        try:
            runs = await self.store.durable_runs(candidates)
        except NotImplementedError:
            return {}  # a store without durable execution has no durable tasks
        limits = {task_id: run.max_resumes for task_id, run in runs.items()}
        lookup = self.max_resumes_of
        if lookup is not None:
            for task_id in candidates:
                if task_id not in limits:  # no attempt began: durable if registered so here
                    snapshot = by_id[task_id]
                    known = lookup(snapshot.name, snapshot.version)
                    if known is not None:
                        limits[task_id] = known
        if not limits:
            return {}
        histories = await self.store.histories(list(limits))
        return {
            task_id: (resumes_so_far(histories[task_id]), max_resumes)
            for task_id, max_resumes in limits.items()
        }

    async def _requeue(
        self,
        entries: list[ReconcileEntry],
        by_id: dict[str, TaskSnapshot],
        *,
        dry_run: bool,
        reason: str | None,
        actor: str,
        at: datetime,
    ) -> list[ReconcileEntry]:
        """Give back what dead workers held of enqueued tasks and nobody else would move.

        A claimed, never started ``queued`` task: its claim is released. A
        ``retry_wait`` one (its retry timer died with its worker): ``->
        queued``, unowned, claimable now, so the retry it was owed runs.
        """
        candidates = [
            entry
            for entry in entries
            if entry.outcome is ReconcileOutcome.ADOPTABLE
            and entry.was in (TaskStatus.QUEUED, TaskStatus.RETRY_WAIT)
            and entry.owner is not None
        ]
        if not candidates:
            return entries
        histories = await self.store.histories([entry.task_id for entry in candidates])
        changed: dict[str, ReconcileEntry] = {}
        for entry in candidates:
            history = histories[entry.task_id]
            if not history or history[0].trigger != Trigger.ENQUEUED:
                continue  # submitted on its node: its recipe is nobody else's to run
            owner = entry.owner
            assert owner is not None
            snapshot = by_id[entry.task_id]
            if entry.was is TaskStatus.RETRY_WAIT:
                given_back = dry_run or await self._requeue_retry(
                    snapshot, reason=reason, actor=actor, at=at, detail=entry.detail
                )
                done = "its retry goes back to the queue"
            else:
                version = snapshot.status_version
                given_back = dry_run or await self.store.release_claim(
                    entry.task_id, owner, version
                )
                done = "given back to the queue"
            if given_back:
                outcome, detail = ReconcileOutcome.REQUEUED, done
            else:
                outcome, detail = ReconcileOutcome.LET_GO, "the task moved on meanwhile"
            changed[entry.task_id] = dataclasses.replace(
                entry, outcome=outcome, detail=f"{entry.detail}; {detail}"
            )
        return [changed.get(entry.task_id, entry) for entry in entries]

    async def _explain_parked(
        self, entries: list[ReconcileEntry], by_id: dict[str, TaskSnapshot]
    ) -> list[ReconcileEntry]:
        """Say which waiting tasks are parked, and until when (one read of their histories)."""
        back = [
            entry.task_id
            for entry in entries
            if entry.outcome is ReconcileOutcome.WAITING and by_id[entry.task_id].attempt > 0
        ]
        if not back:
            return entries
        histories = await self.store.histories(back)
        changed: dict[str, ReconcileEntry] = {}
        for task_id in back:
            history = histories.get(task_id) or []
            if history and history[-1].trigger == Trigger.PARKED:
                detail = parked_detail(by_id[task_id], history[-1])
                changed[task_id] = dataclasses.replace(
                    next(e for e in entries if e.task_id == task_id), detail=detail
                )
        return [changed.get(entry.task_id, entry) for entry in entries]

    async def _requeue_retry(
        self, snapshot: TaskSnapshot, *, reason: str | None, actor: str, at: datetime, detail: str
    ) -> bool:
        """``retry_wait -> queued`` for a dead worker's task; False if it moved meanwhile."""
        queued, transition = requeue_retry_write(
            snapshot, at=at, actor=actor, reason=reason, detail=detail
        )
        try:
            await self.store.save(
                queued, expect_version=snapshot.status_version, transitions=[transition]
            )
        except VersionConflict:
            return False
        return True

    async def _reconcile_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                report = await self.reconcile(
                    dry_run=False,
                    reason="periodic reconcile",
                    actor=f"reconcile:{self.owner}",
                    at=to_datetime(self._clock.time()),
                )
            except StoreClosed:
                return
            except StoreError as error:
                _log.warning("periodic reconcile failed: %s", error)
                continue
            if report.lost:
                _log.warning("reconcile marked %d tasks lost", len(report.lost))

    async def aclose(self, timeout: float) -> None:
        """Stop claiming and reconciling, write what is pending, release the lease."""
        await self._reconciler.stop()
        await self.commands.aclose(timeout)
        await self.progress.aclose()
        await self.writer.aclose(timeout)
        await self.node.aclose()


def _as_planned(entry: ReconcileEntry, plan: tuple[int, int] | None) -> ReconcileEntry:
    """A lost durable attempt's entry as reconcile decides it: resumed, or given up."""
    if plan is None or entry.outcome is not ReconcileOutcome.LOST:
        return entry
    resumes, max_resumes = plan
    if resumes >= max_resumes:
        return dataclasses.replace(
            entry, detail=f"{entry.detail}; durable, but resumed {resumes} times: failed"
        )
    return dataclasses.replace(
        entry,
        outcome=ReconcileOutcome.RESUMED,
        detail=f"{entry.detail}; attempt lost, task back in the queue "
        f"(resume {resumes + 1} of at most {max_resumes})",
    )
