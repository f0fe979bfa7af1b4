"""Reconcile: what happened to tasks whose owner is gone — decided purely, applied apart.

For every unfinished task in the buckets this node owns:

- its owner's node lease is valid → **untouched**, however old its heartbeat
  (a healthy CPU-bound task may not checkpoint for minutes);
- the lease expired and the task held an execution carrier (``starting
  running pausing paused stopping``) → **lost**: nobody can know how far it
  got (trigger ``reconcile:lease_expired``);
- the lease expired and no carrier existed (``pending blocked queued
  retry_wait``) → **adoptable**: reported, state unchanged (nothing runs);
- of those, a ``queued`` task that was *enqueued* (its first transition is
  ``orchestrator:enqueued``) and claimed by the dead worker → **requeued**:
  its claim is given back (owner cleared, no transition: nothing happened to
  it), so any worker that serves it takes it;
- and an enqueued task the dead worker held in ``retry_wait`` (its retry
  timer died with it) → **requeued** too: ``retry_wait -> queued``
  (``reconcile:retry_handed_back``, no owner, claimable at once), so any
  worker that serves it runs the retry it was owed;
- a ``queued`` task with no owner is in the work queue (enqueued and not
  claimed yet, due later, or a durable task parked in a long sleep or fact
  wait): nobody has to adopt it → **waiting**, reported with when it is
  claimable, never as adoptable;
- the write of ``lost`` met another version (the owner came back and moved
  the task first) → **let go**: the owner's word stands;
- a *durable* task (it has a run row) whose attempt was lost while
  ``starting``, ``running`` or ``pausing`` → **resumed**: that attempt is
  recorded lost (``-> retry_wait``, trigger ``reconcile:lease_expired``,
  failure kind ``lost``) and the task goes back to the queue (``-> queued``,
  ``reconcile:resumed``, no owner) for any worker that serves it, which
  replays its memoised steps; after ``max_resumes`` such resumes it ends
  ``failed`` instead (a task that keeps killing its workers). A durable task
  that was ``paused`` or ``stopping`` is recorded ``lost`` like any other:
  its pause or stop cannot be carried over to a replay.

:func:`plan_reconcile` decides from snapshots and node records; the control
plane applies the ``lost`` decisions as compare-and-set writes. A dry run
applies nothing.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from datetime import datetime

from chongming.state.machine import apply_transition
from chongming.state.records import Failure, FailureKind, TaskSnapshot, Transition
from chongming.state.status import CARRIER_STATUSES, TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.nodes import NodeRecord

__all__ = [
    "RESUMABLE",
    "ReconcileEntry",
    "ReconcileOutcome",
    "ReconcileReport",
    "lost_write",
    "parked_detail",
    "plan_reconcile",
    "requeue_retry_write",
    "resume_write",
    "resumes_so_far",
]


class ReconcileOutcome(enum.StrEnum):
    UNTOUCHED = "untouched"
    LOST = "lost"
    ADOPTABLE = "adoptable"
    LET_GO = "let_go"
    REQUEUED = "requeued"
    RESUMED = "resumed"
    WAITING = "waiting"  # in the work queue, unowned: any worker serving it claims it


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileEntry:
    """One task's verdict. ``was`` is its status when reconcile read it."""

    task_id: str
    was: TaskStatus
    outcome: ReconcileOutcome
    owner: str | None
    detail: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileReport:
    """What a reconcile found (and, unless ``dry_run``, did)."""

    dry_run: bool
    at: datetime
    entries: tuple[ReconcileEntry, ...] = ()

    def of(self, outcome: ReconcileOutcome) -> list[ReconcileEntry]:
        return [entry for entry in self.entries if entry.outcome is outcome]

    @property
    def lost(self) -> list[ReconcileEntry]:
        return self.of(ReconcileOutcome.LOST)

    @property
    def adoptable(self) -> list[ReconcileEntry]:
        return self.of(ReconcileOutcome.ADOPTABLE)

    @property
    def untouched(self) -> list[ReconcileEntry]:
        return self.of(ReconcileOutcome.UNTOUCHED)

    @property
    def let_go(self) -> list[ReconcileEntry]:
        return self.of(ReconcileOutcome.LET_GO)

    @property
    def requeued(self) -> list[ReconcileEntry]:
        return self.of(ReconcileOutcome.REQUEUED)

    @property
    def resumed(self) -> list[ReconcileEntry]:
        return self.of(ReconcileOutcome.RESUMED)

    @property
    def waiting(self) -> list[ReconcileEntry]:
        return self.of(ReconcileOutcome.WAITING)


def plan_reconcile(
    snapshots: Iterable[TaskSnapshot],
    nodes: Mapping[str, NodeRecord],
    *,
    owned_buckets: frozenset[int] | None,
    gone: Mapping[str, str] | None = None,
) -> list[ReconcileEntry]:
    """The verdict for each unfinished task this node may judge (see the module docstring).

    ``nodes`` maps owner names to their node rows; an owner with no row has
    no lease. ``gone`` maps owner names whose tasks are judged as a dead
    owner's whatever their row says to the reason (a node that took over the
    lease of its own name from a process that is gone judges what that
    process held). A task outside ``owned_buckets`` is not judged (a task
    with no bucket is judged by any node).
    """
    gone = gone or {}
    entries: list[ReconcileEntry] = []
    for snapshot in snapshots:
        if snapshot.is_terminal:
            continue
        bucket = snapshot.bucket
        if owned_buckets is not None and bucket is not None and bucket not in owned_buckets:
            continue
        owner = snapshot.owner
        if owner is None and snapshot.status is TaskStatus.QUEUED:
            entries.append(_entry(snapshot, ReconcileOutcome.WAITING, _in_the_queue(snapshot)))
            continue
        node = nodes.get(owner) if owner is not None else None
        if owner is not None and owner in gone:
            why = gone[owner]
        elif node is not None and node.live:
            detail = f"owner {owner!r} is alive (lease until {node.lease_expires_at:%H:%M:%S})"
            entries.append(_entry(snapshot, ReconcileOutcome.UNTOUCHED, detail))
            continue
        else:
            why = _why_gone(owner, node)
        if snapshot.status in CARRIER_STATUSES:
            entries.append(_entry(snapshot, ReconcileOutcome.LOST, f"{why}; outcome unknown"))
        else:
            entries.append(
                _entry(snapshot, ReconcileOutcome.ADOPTABLE, f"{why}; {_idle(snapshot)}")
            )
    return entries


def _in_the_queue(snapshot: TaskSnapshot) -> str:
    """Where an unowned queued task stands: due now, due later, or parked until a time."""
    served = snapshot.name if snapshot.version is None else f"{snapshot.name}@{snapshot.version}"
    until = snapshot.not_before
    if until is None:
        when = "claimable now"
    elif snapshot.attempt > 0:
        when = f"back after attempt {snapshot.attempt}, claimable from {until.isoformat()}"
    else:
        when = f"claimable from {until.isoformat()}"
    return f"in the work queue, {when} by any worker serving {served}"


def parked_detail(snapshot: TaskSnapshot, parked: Transition) -> str:
    """The detail of a waiting task whose last move was a park (``runtime:parked``)."""
    served = snapshot.name if snapshot.version is None else f"{snapshot.name}@{snapshot.version}"
    why = parked.reason or "claimable later"
    return (
        f"in the work queue, parked after attempt {snapshot.attempt} (a durable sleep or "
        f"fact wait): {why}, by any worker serving {served}"
    )


def _idle(snapshot: TaskSnapshot) -> str:
    """What a task without a carrier was doing when its owner went away."""
    if snapshot.status is TaskStatus.RETRY_WAIT:
        return f"attempt {snapshot.attempt} failed; it was waiting out its retry backoff"
    if snapshot.attempt > 0:
        return f"not running (attempt {snapshot.attempt} ended)"
    return "it never started"


def requeue_retry_write(
    snapshot: TaskSnapshot, *, at: datetime, actor: str, reason: str | None, detail: str
) -> tuple[TaskSnapshot, Transition]:
    """A dead worker's ``retry_wait`` task back in the queue, claimable now, owned by nobody."""
    queued, transition = apply_transition(
        snapshot,
        TaskStatus.QUEUED,
        trigger=Trigger.RETRY_HANDED_BACK,
        at=at,
        actor=actor,
        reason=reason or f"{detail}; the retry goes to any worker that serves it",
    )
    return dataclasses.replace(queued, owner=None, not_before=None), transition


def lost_write(
    snapshot: TaskSnapshot, *, at: datetime, actor: str, reason: str | None, detail: str
) -> tuple[TaskSnapshot, Transition]:
    """The snapshot and transition that record ``status -> lost`` after a dead owner."""
    return _lost_attempt(snapshot, TaskStatus.LOST, detail, False, at, actor, reason)


def _lost_attempt(
    snapshot: TaskSnapshot,
    target: TaskStatus,
    message: str,
    retryable: bool,
    at: datetime,
    actor: str,
    reason: str | None,
) -> tuple[TaskSnapshot, Transition]:
    """``-> target`` by ``reconcile:lease_expired``, with a ``lost`` failure saying why."""
    failure = Failure(kind=FailureKind.LOST, message=message, retryable=retryable)
    return apply_transition(
        dataclasses.replace(snapshot, failure=failure),
        target,
        trigger=Trigger.LEASE_EXPIRED,
        at=at,
        actor=actor,
        reason=reason or message,
    )


#: Where a lost durable attempt may hand its task back (the table allows ``-> retry_wait``).
RESUMABLE = frozenset({TaskStatus.STARTING, TaskStatus.RUNNING, TaskStatus.PAUSING})


def resumes_so_far(history: Iterable[Transition]) -> int:
    """How many lost attempts of a durable task were resumed (read from its history)."""
    return sum(
        1
        for t in history
        if t.trigger == Trigger.LEASE_EXPIRED and t.to_status is TaskStatus.RETRY_WAIT
    )


def resume_write(
    snapshot: TaskSnapshot,
    *,
    resumes: int,
    max_resumes: int,
    at: datetime,
    actor: str,
    reason: str | None,
    detail: str,
) -> tuple[TaskSnapshot, tuple[Transition, ...]]:
    """A lost durable attempt: back to the queue, or ``failed`` past ``max_resumes``."""
    if resumes >= max_resumes:
        message = (
            f"{detail}; gave up after {resumes} resumes (max_resumes={max_resumes}): "
            "every attempt's worker died"
        )
        failed, transition = _lost_attempt(
            snapshot, TaskStatus.FAILED, message, False, at, actor, reason
        )
        return failed, (transition,)
    lost = f"attempt {snapshot.attempt} lost: {detail}"
    waiting, first = _lost_attempt(snapshot, TaskStatus.RETRY_WAIT, lost, True, at, actor, reason)
    queued, second = apply_transition(
        waiting,
        TaskStatus.QUEUED,
        trigger=Trigger.RESUMED,
        at=at,
        actor=actor,
        reason=f"resume {resumes + 1} of at most {max_resumes}",
    )
    return dataclasses.replace(queued, owner=None), (first, second)


def _entry(snapshot: TaskSnapshot, outcome: ReconcileOutcome, detail: str) -> ReconcileEntry:
    return ReconcileEntry(
        task_id=snapshot.task_id,
        was=snapshot.status,
        outcome=outcome,
        owner=snapshot.owner,
        detail=detail,
    )


def _why_gone(owner: str | None, node: NodeRecord | None) -> str:
    if owner is None:
        return "no owner recorded"
    if node is None:
        return f"owner {owner!r} has no node lease"
    return f"owner {owner!r}'s lease expired at {node.lease_expires_at.isoformat()}"
