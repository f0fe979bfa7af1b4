"""The persistence port every backend implements.

Four kinds of data are kept apart because their write rates and consistency
needs differ:

- snapshots (``create``, ``save``, ``get``, ``query``): compare-and-set on
  ``status_version``; a stale writer gets :class:`VersionConflict`;
- history (``append``, ``history``): append-only, idempotent per
  ``(task_id, version)``, always returned in version order;
- the hot path (``touch``): progress and heartbeat; never bumps the version
  and never conflicts with a state write;
- commands (``submit_command``, ``claim_commands``, ``complete_command``,
  ``release_command``, ``command_records``): cross-process control, claimed
  with a lease, completed with a recorded outcome;
- nodes (``register_node``, ``renew_node``, ``release_node``, ``nodes``): one
  lease per node, judged by the store's clock, whatever the number of tasks
  the node holds (a task names its owner; the owner's node lease says whether
  it is alive). There are no per-task leases.
- counts (``task_counts``): grouped by status, bucket and owner.

Every method may raise :class:`StoreClosed` after ``close()`` and
:class:`StoreUnavailable` / :class:`StoreBusy` / :class:`StoreFull` when the
backend fails; no driver exception ever escapes.

Cancellation: cancelling a call leaves the outcome of a write unknown (the
statement may still commit). Callers that must know re-read; stores resolve
their own internal retries the same way.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from chongming.errors import (
    DuplicateTaskId,
    PayloadError,
    StoreClosed,
    StoreError,
    TaskNotFound,
    VersionConflict,
)
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.stores.nodes import CommandRecord, CommandState, NodeInfo, NodeRecord, TaskCount
from chongming.stores.writes import StateWrite, WriteOutcome, WriteResult

if TYPE_CHECKING:  # queue.py uses stores.checks, which imports this module
    from chongming.stores.durable import Commit, DurableRun, EffectState, Fact, StepRecord
    from chongming.stores.limits import ClusterLimit
    from chongming.stores.queue import ClaimedTask, Enqueued, Serves

__all__ = [
    "Command",
    "CommandKind",
    "CommandState",
    "TaskStore",
    "count_key",
    "is_stored",
]


class CommandKind(enum.StrEnum):
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """A control request for a task held by another process.

    ``target_owner`` addresses the command to the node that holds the task
    (``None``: any node may claim it). ``claimed_by`` and
    ``lease_expires_at`` are filled in by the store when it is claimed.
    """

    command_id: str
    task_id: str
    kind: CommandKind
    created_at: datetime
    actor: str = "user"
    reason: str | None = None
    target_owner: str | None = None
    claimed_by: str | None = None
    lease_expires_at: datetime | None = None


class TaskStore(abc.ABC):
    """Async persistence for tasks. See the module docstring for the contract."""

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Connect and migrate; called implicitly by the first operation."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release every connection. Idempotent; later calls raise StoreClosed."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- snapshots -----------------------------------------------------------

    @abc.abstractmethod
    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """Insert a new task (and its first transitions) atomically.

        Raises :class:`DuplicateTaskId` when the id exists; nothing is written then.
        """

    @abc.abstractmethod
    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        """Replace the snapshot if the stored ``status_version`` equals ``expect_version``.

        ``transitions`` are appended in the same transaction (the combined path
        the state machine uses). Raises :class:`VersionConflict` on a stale
        version and :class:`TaskNotFound` for an unknown id; nothing is
        written in either case. Lease columns are never written.
        """

    @abc.abstractmethod
    async def get(self, task_id: str) -> TaskSnapshot | None:
        """The stored snapshot, or ``None``."""

    @abc.abstractmethod
    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        """Snapshots matching ``query``, ordered by ``created_at`` then ``task_id``."""

    async def apply_writes(self, writes: Sequence[StateWrite]) -> list[WriteResult]:
        """Apply independent state writes; one result per write, in order.

        Each write is atomic (``create`` when ``expect_version`` is None, else
        ``save``). A conflict, a duplicate or a missing task is that write's
        outcome, never its neighbours'. ``FAILED`` means *not written*: a
        write whose outcome the store could not tell is re-read first, and a
        write re-sent after such a failure whose effect is already stored
        (the same snapshot at the new version, its transitions in the history)
        is reported ``WRITTEN``, never ``CONFLICT`` or ``DUPLICATE``.
        :class:`StoreClosed` and :class:`PayloadError` (a bug of the caller:
        records are checked before they get here) are raised. This default
        applies the writes one by one; the built-in backends override it to
        commit a batch at once.

        Cancellation: writes already handed to the backend may still commit;
        the caller re-reads (or re-sends, which is safe) to find out.
        """
        results: list[WriteResult] = []
        for write in writes:
            try:
                if write.expect_version is None:
                    await self.create(write.snapshot, write.transitions)
                else:
                    await self.save(write.snapshot, write.expect_version, write.transitions)
            except (StoreClosed, PayloadError):
                raise
            except VersionConflict as conflict:
                results.append(await self._resent(write, conflict.actual, _CONFLICT))
            except DuplicateTaskId:
                results.append(await self._resent(write, write.snapshot.status_version, _DUPLICATE))
            except TaskNotFound:
                results.append(_NOT_FOUND)
            except StoreError as error:
                results.append(WriteResult(outcome=WriteOutcome.FAILED, error=error))
            else:
                results.append(_WRITTEN)
        return results

    async def _resent(
        self, write: StateWrite, current: int | None, lost: WriteResult
    ) -> WriteResult:
        """``WRITTEN`` when ``write`` is already stored (a re-send), else ``lost``."""
        if current != write.snapshot.status_version:
            return lost
        try:
            if await is_stored(self, write):
                return _WRITTEN
        except StoreClosed:
            raise
        except StoreError:
            pass  # cannot tell: the loser's outcome stands (nothing of this call was written)
        return lost

    # -- the work queue (work for any node) -------------------------------------

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
    ) -> Enqueued:
        """Insert a task any node may claim; once per idempotency key.

        Like :meth:`create`, plus: when ``snapshot.idempotency_key`` is set and
        already names a task, nothing is written and that task is returned
        (``created=False``) if it was enqueued with the same input (name,
        version, arguments: :func:`~chongming.stores.queue.input_digest`);
        with different input :class:`IdempotencyConflict` is raised. A key
        lives as long as its task. Optional: a store without the work queue
        raises ``NotImplementedError``.

        ``connection``: the caller's own connection, inside its open
        transaction, on the database that holds the store. The task is then
        written in that transaction (under a savepoint: a refusal leaves the
        transaction usable) and exists if and only if the caller commits. A
        store that cannot join the caller's transaction raises
        :class:`ConfigurationError`.

        ``trace_carrier``: the enqueuer's trace context (see
        :func:`~chongming.stores.queue.check_trace_carrier`), written with the
        task in the same write and read back by a worker that traces, after its
        claim (:meth:`trace_carriers`); a bad one is refused with
        :class:`PayloadError`. A task that was not created (an idempotency
        key's twin) keeps what it was enqueued with.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (enqueue)")

    async def enqueue_many(
        self,
        items: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
    ) -> list[Enqueued | Exception]:
        """:meth:`enqueue` for each ``(snapshot, transitions)``, each on its own.

        The answers come in order: what ``enqueue`` returned, or the error it
        raised for that item (the others are enqueued all the same). This
        default calls ``enqueue`` per item; a store may write them together.
        """
        carried = {} if trace_carrier is None else {"trace_carrier": trace_carrier}
        results: list[Enqueued | Exception] = []
        for snapshot, transitions in items:
            try:
                results.append(
                    await self.enqueue(snapshot, transitions, connection=connection, **carried)
                )
            except Exception as error:
                results.append(error)
        return results

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        """The trace carriers stored with these tasks at enqueue (ids without one are absent).

        Read by a worker after a plain :meth:`claim` when it traces. Optional:
        the default keeps none (attempts then start traces of their own).
        """
        return {}

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
    ) -> list[TaskSnapshot]:
        """Take up to ``limit`` queued tasks nobody holds, writing ``owner`` as their owner.

        Claimable: status ``queued``, no owner, ``not_before`` unset or past by
        the store's clock, bucket in ``buckets`` (``None``: any; a task without
        a bucket is claimable by every node), ``serves[name]`` holding the
        task's version (an unversioned task matches any served version), and
        none of ``exclude_tags`` among its tags (a worker leaves alone what it
        could not start now, e.g. a tag whose cluster-wide slots are all held).
        Order: higher ``priority`` first, then earlier ``queued_at``, then
        ``task_id``. Atomic: two claimers never take the same task. The status
        and its version do not change (the claimer starts the task through the
        state machine); the snapshots returned carry the new owner.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (claim)")

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        at: datetime,
    ) -> list[ClaimedTask]:
        """:meth:`claim`, and every task taken moves ``queued -> starting`` in the same step.

        For a claimer that launches at once whatever it takes (it has the free
        slots): the start is durable when this returns, with no write of its
        own, and the claimer learns each task's whole history in the same
        call. The transition is what a dispatch writes (trigger
        ``scheduler:dispatch``, actor ``system``, at ``at``, the next attempt;
        ``updated_at`` is ``at``). Same filters and order as :meth:`claim`;
        atomic like it. A claimer that dies before launching leaves
        ``starting`` tasks, which reconcile calls lost (never run twice),
        where a plain claim would have been requeued.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (claim_started)")

    async def wait_queue_hint(self) -> None:
        """Return when a task may have been enqueued. Only a hint: claim afterwards.

        The first call (and any call after the listening session was lost)
        may return at once. The default never returns; callers wrap it in
        their poll interval.
        """
        import anyio

        await anyio.sleep_forever()

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        """Give a claimed task back to the queue: its owner is cleared.

        Only if it is still ``queued`` at ``expect_version`` and held by
        ``owner`` (it never started here); ``False`` (nothing written)
        otherwise. A worker shutting down returns what it claimed but did not
        start, so a rolling restart loses nothing.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (release_claim)")

    # -- cluster-wide limits (stores/limits.py) -----------------------------------

    async def declare_cluster_limit(self, name: str, capacity: int) -> int:
        """Create cluster limit ``name`` with ``capacity`` unless it exists; the stored capacity.

        The store's value wins: a node declaring another capacity keeps the
        fleet's (change it with :meth:`set_cluster_limit`). Optional: a store
        without cluster limits raises ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")

    async def set_cluster_limit(self, name: str, capacity: int) -> None:
        """Create or change a cluster limit. Lowering it stops nothing that runs:
        nodes take no new slots until the holders are back under it."""
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")

    async def lease_cluster_slots(
        self, name: str, owner: str, incarnation: str, *, want: int, keep: int
    ) -> int:
        """Set how many slots of ``name`` this node holds; the number it holds now.

        One atomic decision by the store's clock
        (:func:`~chongming.stores.limits.granted_slots`): at least ``keep``,
        at most ``want``, new slots only from what live nodes leave free.
        Rows of nodes whose lease expired stop counting (and are dropped).
        An unknown ``name`` raises :class:`UnknownClusterLimit`.
        """
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")

    async def cluster_limits(self) -> list[ClusterLimit]:
        """Every cluster limit with the slots live nodes hold, by name."""
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")

    # -- durable execution (stores/durable.py) -------------------------------------

    async def store_time(self) -> datetime:
        """The store's clock now: durable sleeps and fact deadlines are set and judged by it.

        Every node that replays a task then agrees on when it wakes, whatever
        their own clocks say, and a parked task's earliest start means the
        same to the claim. The default is this process's clock (a store
        without a clock of its own, shared by one machine).
        """
        return datetime.now(UTC)

    async def begin_durable_attempt(self, task_id: str, owner: str, *, max_resumes: int) -> int:
        """Raise the task's epoch for a new attempt of ``owner``; the new epoch.

        Only while the task is ``starting`` or ``running`` with ``owner`` as its
        owner (else :class:`~chongming.stores.durable.StaleEpoch`). Creates the
        run row on the first attempt, with ``max_resumes``. Optional: a store
        without durable execution raises ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def durable_runs(self, task_ids: Collection[str]) -> dict[str, DurableRun]:
        """The run rows of those tasks that have one (durable tasks that started)."""
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def record_step(self, task_id: str, epoch: int, step: StepRecord) -> StepRecord:
        """Memoise a step for the attempt holding ``epoch``; the step as stored.

        One transaction: the epoch must still be the task's and the task must
        still hold a carrier, else :class:`~chongming.stores.durable.StaleEpoch`
        and nothing is written. A step already recorded under its name and
        occurrence is returned as it was stored (the first record wins).
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def steps(self, task_id: str) -> list[StepRecord]:
        """The memoised steps of a task, in the order they were recorded."""
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def put_fact(self, fact: Fact) -> bool:
        """Persist a set-once fact for a task; True when this call set it.

        The same value again is a no-op (False); another value raises
        :class:`~chongming.errors.FactConflict`; an unknown task raises
        :class:`~chongming.errors.TaskNotFound`. In the same transaction, a
        task parked waiting for this fact is woken (see :meth:`wake_for_fact`).
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def wake_for_fact(self, task_id: str, name: str) -> bool:
        """Make a task parked waiting for fact ``name`` claimable now, if the fact is there.

        Parked waiting: ``queued``, unowned, with an earliest start, and its
        steps hold more deadlines of ``fact:<name>`` than decisions. Called by
        the node that parked the task once the park is durable: a fact sent
        while the task was still being parked is not left waiting for the
        deadline. True when it woke the task.
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def get_fact(self, task_id: str, name: str) -> Fact | None:
        """The fact ``name`` of a task, if it was sent."""
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def facts(self, task_id: str) -> list[Fact]:
        """Every fact of a task, by name."""
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def begin_effect(self, task_id: str, epoch: int, op_key: str) -> EffectState:
        """Look up an operation of the attempt holding ``epoch``; write its intent if new.

        Fenced like :meth:`record_step` (:class:`~chongming.stores.durable.StaleEpoch`).
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def finish_effect(
        self, task_id: str, epoch: int, op_key: str, result: Any, commit: Commit | None
    ) -> Any:
        """Record the operation's result and run ``commit`` in one transaction; the result.

        The fencing check, ``commit(connection, result)`` and the ledger row
        commit together or not at all: a stale epoch raises
        :class:`~chongming.stores.durable.StaleEpoch` and ``commit`` never
        runs; an error of ``commit`` is raised and nothing is written. An
        operation already done answers its stored result (``commit`` not run).
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    # -- history -------------------------------------------------------------

    @abc.abstractmethod
    async def append(self, transitions: Sequence[Transition]) -> None:
        """Append transitions; an existing ``(task_id, version)`` is left as it is."""

    @abc.abstractmethod
    async def history(self, task_id: str) -> list[Transition]:
        """All transitions of a task in version order (empty for an unknown id)."""

    async def histories(self, task_ids: Collection[str]) -> dict[str, list[Transition]]:
        """:meth:`history` of several tasks at once (a worker adopting a claim).

        Every id is a key (an empty list for an unknown one). This default
        reads them one by one; the built-in stores answer in one query.
        """
        return {task_id: await self.history(task_id) for task_id in task_ids}

    # -- hot path ------------------------------------------------------------

    @abc.abstractmethod
    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
        owner: str | None = None,
    ) -> None:
        """Record progress and/or a heartbeat. Never changes ``status_version``.

        An unknown id is ignored: the hot path must not fail a task. With
        ``owner``, only while the task's owner is that node: an attempt whose
        task was taken over elsewhere (a zombie) writes nothing, the same
        fencing its steps get from the epoch.
        """

    # -- commands ------------------------------------------------------------

    @abc.abstractmethod
    async def submit_command(self, command: Command) -> None:
        """Store a new, unclaimed command and wake pollers."""

    @abc.abstractmethod
    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        """Claim up to ``limit`` unfinished commands addressed to ``owner`` (or to nobody)
        whose lease is free or expired, oldest first. Two concurrent claimers never
        get the same command while its lease runs."""

    @abc.abstractmethod
    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        """Mark a command done and record ``outcome`` (what became of it) and the time.

        Returns False if ``owner`` no longer holds its lease (nothing is
        written then). ``outcome`` is checked like any stored text (no NUL,
        no lone surrogates, at most :data:`~chongming.stores.checks.MAX_OUTCOME_CHARS`
        characters): :class:`PayloadError` otherwise.
        """

    @abc.abstractmethod
    async def release_command(self, command_id: str, owner: str) -> bool:
        """Hand a claimed command back untouched (lease cleared) for its real holder."""

    async def wait_command_hint(self) -> None:
        """Return when a command may have arrived. Only a hint: poll afterwards.

        The default never returns; callers wrap it in their poll interval.
        """
        import anyio

        await anyio.sleep_forever()

    @abc.abstractmethod
    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        """Commands newest first (``created_at`` then ``command_id``, descending), of one
        task or all, at most ``limit``, each with its :class:`CommandState` (judged by
        the store's clock: a claim whose lease ran out is ``pending`` again) and its
        recorded outcome."""

    # -- nodes (one lease per node) -------------------------------------------

    @abc.abstractmethod
    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        """Register ``info.owner`` with a lease ``ttl_seconds`` from the store's now.

        Takes over the row when it is absent, expired, or of the same
        incarnation (``started_at`` is kept for the same incarnation). Raises
        :class:`NodeConflict` (naming the other's host and pid) when a live
        node of another incarnation holds the owner name; nothing is written
        then. Atomic: of two processes registering one owner at once, exactly
        one wins.
        """

    @abc.abstractmethod
    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        """Extend this node's lease to ``ttl_seconds`` from the store's now (one row,
        whatever its task count).

        False when the row is gone or belongs to another incarnation: this
        node was replaced and must stop acting as ``owner``. A node's own row
        is renewed even after its lease ran out, as long as nobody took it.
        """

    @abc.abstractmethod
    async def release_node(self, owner: str, incarnation: str) -> None:
        """On a clean close: the lease expires now, so its tasks are judged at once.

        A row of another incarnation is left alone.
        """

    @abc.abstractmethod
    async def nodes(self) -> list[NodeRecord]:
        """Every node row, live or expired, ordered by owner; ``live`` judged by the
        store's clock at read time."""

    # -- what the CLI and reports read ----------------------------------------

    @abc.abstractmethod
    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        """Task counts grouped by (status, bucket, owner), sorted by :func:`count_key`.

        ``active_only``: only unfinished tasks (statuses in ``ACTIVE_STATUSES``).
        """


def count_key(count: TaskCount) -> tuple[str, bool, int, bool, str]:
    """The order of :meth:`TaskStore.task_counts`: status, then bucket and owner, ``None`` first."""
    return (
        count.status.value,
        count.bucket is not None,
        count.bucket or 0,
        count.owner is not None,
        count.owner or "",
    )


async def is_stored(store: TaskStore, write: StateWrite) -> bool:
    """Does ``store`` hold exactly what ``write`` writes (a re-read after an unknown outcome)?

    The snapshot is compared in its stored form, except the hot-path fields
    (progress, heartbeat) that ``touch`` may have changed since; every
    transition of the write must be in the history as given.
    """
    from chongming.stores.stored import as_stored, utc_transition

    stored = await store.get(write.snapshot.task_id)
    if stored is None:
        return False
    ours = as_stored(write.snapshot, None)
    if (
        dataclasses.replace(
            stored, progress=ours.progress, last_heartbeat_at=ours.last_heartbeat_at
        )
        != ours
    ):
        return False
    if not write.transitions:
        return True
    history = {t.version: t for t in await store.history(write.snapshot.task_id)}
    return all(history.get(t.version) == utc_transition(t) for t in write.transitions)


_WRITTEN = WriteResult(outcome=WriteOutcome.WRITTEN)
_CONFLICT = WriteResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = WriteResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = WriteResult(outcome=WriteOutcome.NOT_FOUND)
