"""The exception tree of chongming.

Every error chongming raises on purpose derives from :class:`ChongmingError`.
Where a builtin means the same thing it is mixed in, so ``except LookupError``
keeps working for callers who do not know chongming::

    ChongmingError
    ├── ConfigurationError (ValueError)    a bad policy, limit, name or registration
    │   ├── UnknownTask (LookupError)      submit of a name nobody registered
    │   ├── BucketNotOwned                 submit into a bucket this node does not own
    │   ├── InvalidPipeline                a pipeline that cannot run as built
    │   │   ├── DuplicateNode              two nodes with one id
    │   │   ├── UnknownUpstream (LookupError)  depends_on names no node of the pipeline
    │   │   └── PipelineCycle              the dependencies go round (the cycle is named)
    │   ├── QuorumNotSupported             quorum settlement asked of a pipeline
    │   ├── InvalidRetention               a retention or prune setting (names the field)
    │   │   ├── RetentionTooShort          a period under the idempotency window
    │   │   └── TaskNotPrunable            a task asked for by id that must stay
    │   ├── ChildCycle                     a child named its own ancestor (same name and key)
    │   └── ScheduleInvalid                a schedule that cannot fire as given (the field named)
    ├── PayloadError (ValueError)          arguments, ids or labels that cannot be stored
    ├── DuplicateTask                      a task id already in use
    ├── InvalidTransition                  the state table forbids the move
    ├── TaskCancelled                      raised at a checkpoint once a stop was requested
    │   └── NeverStarted                   the carrier saw the stop before the function began
    ├── CheckpointMisuse (TypeError)       the wrong checkpoint flavour for the task kind
    ├── ControllerClosed (RuntimeError)    use of a controller after close()
    ├── ExecutorClosed (RuntimeError)      use of an executor after aclose()
    ├── AdmissionStateError (LookupError)  an admission-queue item in the wrong state for the call
    ├── UnknownNode (LookupError)          a running pipeline has no node with this id
    ├── NondeterminismError                a durable replay called its steps in another order
    ├── StepFailed                         a memoised step raised (first run and replay alike)
    ├── FactTimeout (TimeoutError)         wait_for_fact decided: no fact in time (and replays so)
    ├── TaskFailed                         a task awaited for its result ended without succeeding
    │   └── ChildFailed                    a child (ctx.child, ctx.gather) did not succeed
    └── StoreError                         the persistence layer, translated at its boundary
        ├── StoreClosed                    use of a store after close()
        ├── VersionConflict                a compare-and-set on status_version lost
        ├── TaskNotFound (LookupError)     no such task in the store
        ├── DuplicateTaskId (DuplicateTask)  create() of an id the store already holds
        ├── StoreUnavailable               the server or file cannot be reached
        ├── StoreBusy                      SQLite stayed locked past its busy timeout
        ├── StoreFull                      the disk or the database size limit is full
        ├── NodeConflict                   another live node already runs under this owner name
        ├── IdempotencyConflict            a key reused with different input
        ├── FactConflict                   a fact already set to another value
        ├── UnknownClusterLimit (LookupError)  slots asked of a limit the store does not hold
        ├── UnknownRateLimit (LookupError)  grants asked of a rate limit the store does not hold
        ├── UnknownSchedule (LookupError)  a schedule key the store does not hold
        └── SchemaError                    the schema is newer than this code, or broken

Outside the tree, a ``BaseException`` so ``except Exception`` cannot swallow it:
``FencingError``, raised to a durable attempt that another attempt replaced.

Messages are built from fields kept as attributes, so callers can branch on
the fields instead of parsing text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "AdmissionStateError",
    "BucketNotOwned",
    "CheckpointMisuse",
    "ChildCycle",
    "ChildFailed",
    "ChongmingError",
    "ConfigurationError",
    "ControllerClosed",
    "DuplicateNode",
    "DuplicateTask",
    "DuplicateTaskId",
    "ExecutorClosed",
    "FactConflict",
    "FactTimeout",
    "FencingError",
    "IdempotencyConflict",
    "InvalidPipeline",
    "InvalidRetention",
    "InvalidTransition",
    "NeverStarted",
    "NodeConflict",
    "NondeterminismError",
    "PayloadError",
    "PipelineCycle",
    "QuorumNotSupported",
    "RetentionTooShort",
    "ScheduleInvalid",
    "SchemaError",
    "StepFailed",
    "StoreBusy",
    "StoreClosed",
    "StoreError",
    "StoreFull",
    "StoreUnavailable",
    "TaskCancelled",
    "TaskFailed",
    "TaskNotFound",
    "TaskNotPrunable",
    "UnknownClusterLimit",
    "UnknownNode",
    "UnknownRateLimit",
    "UnknownSchedule",
    "UnknownTask",
    "UnknownUpstream",
    "VersionConflict",
]


class ChongmingError(Exception):
    """Root of every error chongming raises on purpose."""


class ConfigurationError(ChongmingError, ValueError):
    """A policy, limit, registration or call argument is not acceptable."""


class UnknownTask(ConfigurationError, LookupError):
    """A task name was submitted that nobody registered."""

    def __init__(self, name: str, registered: tuple[str, ...]) -> None:
        self.name = name
        self.registered = registered
        known = ", ".join(registered) if registered else "none"
        super().__init__(f"unknown task name {name!r}; registered names: {known}")


class BucketNotOwned(ConfigurationError):
    """The task's bucket belongs to another node; it would sit queued forever here."""

    def __init__(self, bucket: int, owned: str) -> None:
        self.bucket = bucket
        super().__init__(f"bucket {bucket} is not owned by this node (owned buckets: {owned})")


class InvalidRetention(ConfigurationError):
    """A retention or prune setting that cannot be used; nothing was deleted."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}: {problem}; {fix}")


class RetentionTooShort(InvalidRetention):
    """A period shorter than the idempotency window: a key could die before a replay needs it."""

    def __init__(self, field: str, period: str, window: str) -> None:
        self.period = period
        self.window = window
        super().__init__(
            field,
            f"{period} is shorter than the idempotency window ({window})",
            "keep terminal tasks at least that long, or lower idempotency_window"
            " if no enqueue (the outbox's relay included) can be retried that late",
        )


class TaskNotPrunable(InvalidRetention):
    """A task named by id that a prune must keep (not terminal, or within the window)."""

    def __init__(self, task_id: str, why: str) -> None:
        self.task_id = task_id
        self.why = why
        super().__init__(
            "task_id", f"task {task_id!r} {why}", "prune only terminal tasks past the window"
        )


class ScheduleInvalid(ConfigurationError):
    """A schedule was given a value it cannot fire with; ``field`` names which one."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"schedule {field}: {reason}")


class PayloadError(ChongmingError, ValueError):
    """A value that must be stored (arguments, result, id, label) cannot be."""

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(f"{what}: {reason}")


class DuplicateTask(ChongmingError):
    """A task id is already in use by a live or recorded task."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"task id {task_id!r} is already in use")


class InvalidTransition(ChongmingError):
    """The state table does not allow moving from ``current`` to ``target``."""

    def __init__(self, current: object, target: object) -> None:
        self.current = current
        self.target = target
        super().__init__(f"transition {_name(current)} -> {_name(target)} is not allowed")


class TaskCancelled(ChongmingError):
    """Raised inside a task at a checkpoint after a stop was requested.

    Let it propagate: the runtime records ``stopped`` only when the task really
    ended. A task that catches it and returns normally is reported as having
    finished anyway (``succeeded``), because that is what happened.
    """


class NeverStarted(TaskCancelled):
    """A carrier was stopped or given up on before the task function began."""


class CheckpointMisuse(ChongmingError, TypeError):
    """The checkpoint flavour does not match how the task runs."""


class ControllerClosed(ChongmingError, RuntimeError):
    """The controller was closed; it accepts no more calls."""


class ExecutorClosed(ChongmingError, RuntimeError):
    """An executor was asked to run something after ``aclose()``."""


class AdmissionStateError(ChongmingError, LookupError):
    """An admission-queue call named an item that is not in the state it needs.

    Pushing an item that is already waiting or running, or releasing one that
    is not running, means the caller's bookkeeping and the queue's disagree;
    carrying on would leak or double-count slots, so it fails loudly.
    """

    def __init__(self, item: object, actual: str, expected: str) -> None:
        self.item = item
        self.actual = actual
        self.expected = expected
        super().__init__(f"admission item {item!r} is {actual}; expected it to be {expected}")


class StoreError(ChongmingError):
    """The persistence layer failed; driver errors are translated to this tree."""


class StoreClosed(StoreError):
    """The store was closed; any further use is a programming error."""

    def __init__(self, store: str = "store") -> None:
        super().__init__(f"{store} is closed")


class VersionConflict(StoreError):
    """A compare-and-set save found another status_version than expected."""

    def __init__(self, task_id: str, expected: int, actual: int | None) -> None:
        self.task_id = task_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"task {task_id!r}: expected status_version {expected}, store has {actual}"
        )


class TaskNotFound(StoreError, LookupError):
    """No task with this id exists."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"no task with id {task_id!r}")


class DuplicateTaskId(StoreError, DuplicateTask):
    """create() was called with an id the store already holds."""

    def __init__(self, task_id: str) -> None:
        DuplicateTask.__init__(self, task_id)


class StoreUnavailable(StoreError):
    """The database cannot be reached or opened (never carries a password)."""


class StoreBusy(StoreError):
    """The database stayed locked by someone else past the busy timeout."""


class StoreFull(StoreError):
    """The disk or the database's size limit is full; nothing was half-written."""


class SchemaError(StoreError):
    """The stored schema is newer than this code understands, or damaged."""


def _name(value: object) -> str:
    return str(getattr(value, "value", value))


class NodeConflict(StoreError):
    """A live node already holds this owner name: two nodes must never share one."""

    def __init__(
        self, owner: str, host: str, pid: int, *, lease_expires_at: datetime | None = None
    ) -> None:
        self.owner = owner
        self.host = host
        self.pid = pid
        self.lease_expires_at = lease_expires_at
        until = ""
        if lease_expires_at is not None:
            until = (
                f" until {lease_expires_at.isoformat()} unless it renews (if that node is"
                " gone, the name is free then)"
            )
        super().__init__(
            f"owner {owner!r} is already held by a live node (host {host!r}, pid {pid}){until}; "
            "give this node another --owner, or stop the other one"
        )


class InvalidPipeline(ConfigurationError):
    """A pipeline that cannot run as built; nothing of it was submitted."""

    def __init__(self, pipeline: str, problem: str) -> None:
        self.pipeline = pipeline
        self.problem = problem
        super().__init__(f"pipeline {pipeline!r}: {problem}")


class DuplicateNode(InvalidPipeline):
    """Two nodes of one pipeline were given the same id."""

    def __init__(self, pipeline: str, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(
            pipeline, f"node id {node_id!r} is used twice; give each node its own node_id="
        )


class UnknownUpstream(InvalidPipeline, LookupError):
    """A node depends on an id that no node of the pipeline has."""

    def __init__(self, pipeline: str, node_id: str, upstream: str) -> None:
        self.node_id = node_id
        self.upstream = upstream
        super().__init__(
            pipeline, f"node {node_id!r} depends on {upstream!r}, which is not a node of it"
        )


class PipelineCycle(InvalidPipeline):
    """The dependencies go round, so no node of the cycle could ever start."""

    def __init__(self, pipeline: str, cycle: tuple[str, ...]) -> None:
        self.cycle = cycle
        path = " -> ".join(repr(node_id) for node_id in cycle)
        super().__init__(pipeline, f"the dependencies form a cycle: {path}")


class QuorumNotSupported(ConfigurationError):
    """Quorum settlement was asked of a pipeline; the message says why it is refused."""

    def __init__(self, asked: str) -> None:
        self.asked = asked
        super().__init__(
            f"{asked!r}: quorum settlement is not supported. A quorum counts how many "
            "copies of the same work succeeded (k of n); the nodes of a pipeline each do "
            "different work, so 'k of them succeeded' would be a number nobody could "
            "predict the meaning of. Fan the copies out inside one task and decide there, "
            "or let a downstream node use join=JoinMode.ANY_SUCCEEDED or ALL_SETTLED."
        )


class UnknownNode(ChongmingError, LookupError):
    """A running pipeline was asked for a node id it does not have."""

    def __init__(self, pipeline: str, node_id: str) -> None:
        self.pipeline = pipeline
        self.node_id = node_id
        super().__init__(f"pipeline {pipeline!r} has no node {node_id!r}")


class IdempotencyConflict(StoreError):
    """An idempotency key was reused with different input (name, version or arguments).

    The same key with the same input returns the task it already names; a
    different input is refused on every path, so a caller can never be
    answered with a task that does something other than what it asked for.
    """

    def __init__(self, key: str, task_id: str) -> None:
        self.key = key
        self.task_id = task_id
        shown = key if len(key) <= 80 else key[:77] + "..."
        super().__init__(
            f"idempotency key {shown!r} already names task {task_id!r}, enqueued with "
            "different input (name, version or arguments); use a new key for new input"
        )


class UnknownClusterLimit(StoreError, LookupError):
    """Slots were asked of a cluster limit the store does not hold."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"the store has no cluster limit {name!r}; declare it "
            "(Controller(cluster_limits={...}) or `chongming limits set`)"
        )


class UnknownRateLimit(StoreError, LookupError):
    """Start grants were asked of a rate limit the store does not hold."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"the store has no rate limit {name!r}; declare it "
            "(Controller(rate_limits={...}) or `chongming worker --rate-limit`)"
        )


class UnknownSchedule(StoreError, LookupError):
    """A schedule key was named that the store does not hold."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"the store has no schedule {key!r}; list them with `chongming schedules ls`"
        )


class FencingError(BaseException):
    """This attempt no longer holds its task: another attempt replaced it.

    A ``BaseException`` (like ``KeyboardInterrupt``), so a task's ``except
    Exception`` cannot swallow it by accident: once raised, every later call
    of the attempt's context raises it again, and nothing the attempt writes
    is accepted.
    """

    def __init__(self, task_id: str, epoch: int, why: str) -> None:
        self.task_id = task_id
        self.epoch = epoch
        super().__init__(f"attempt (epoch {epoch}) of task {task_id!r} was replaced: {why}")


class NondeterminismError(ChongmingError):
    """A durable task called a recorded step before the step it was recorded after.

    Steps that finished in another order replay, and inserting a new step
    is allowed; calling a recorded step before the one its flow called
    ahead of it is not: the code changed under a running task (give it a
    new version). Never retried: every attempt of this code would meet it.
    """

    def __init__(self, task_id: str, step: str, expected: str | None) -> None:
        self.task_id = task_id
        self.step = step
        #: The step the record has ``step`` called after (not called yet here).
        self.expected = expected
        ahead = "" if expected is None else f" before {expected!r}, the step it was recorded after"
        super().__init__(
            f"task {task_id!r} called step {step!r}{ahead}: the recorded order does not "
            "hold (the code changed under a running task); register the changed code as a "
            "new version"
        )


class StepFailed(ChongmingError):
    """A memoised step raised: the same error on its first run and on every replay.

    The original exception is kept as ``__cause__`` on the first run only;
    a replay has its recorded type name and message.
    """

    def __init__(self, step: str, error_type: str, message: str) -> None:
        self.step = step
        self.error_type = error_type
        self.message = message
        super().__init__(f"step {step!r} failed: {error_type}: {message}")


class TaskFailed(ChongmingError):
    """A task awaited for its result (``QueuedTask.result``) ended without succeeding.

    ``status``: its terminal status (``failed``, ``stopped``, ``lost``, ...);
    ``message``: its failure's text; ``error_type``: the exception's type
    name, when an exception ended it.
    """

    def __init__(self, task_id: str, status: str, message: str, error_type: str = "") -> None:
        self.task_id = task_id
        self.status = status
        self.message = message
        self.error_type = error_type
        kind = f"{error_type}: " if error_type else ""
        super().__init__(f"{self._what()} {task_id!r} ended {status}: {kind}{message}")

    def _what(self) -> str:
        return "task"


class ChildFailed(TaskFailed):
    """A child task (``ctx.child`` / ``ctx.gather``) did not succeed.

    A :class:`TaskFailed` whose ``child_id`` is the child's task id. The
    parent may catch it; uncaught, the parent fails with it. Decided once: a
    replay raises the same.
    """

    def __init__(self, child_id: str, status: str, message: str, error_type: str = "") -> None:
        self.child_id = child_id
        super().__init__(child_id, status, message, error_type)

    def _what(self) -> str:
        return "child task"


class ChildCycle(ConfigurationError):
    """A child named an ancestor of its parent (same name and key): it would wait for itself."""

    def __init__(self, name: str, key: str, ancestor: str) -> None:
        self.name = name
        self.key = key
        self.ancestor = ancestor
        super().__init__(
            f"ctx.child({name!r}, key={key!r}): task {ancestor!r}, an ancestor of this task, "
            "was enqueued under that name and key, so the child would be its own ancestor "
            "and wait for itself; give the child another key"
        )


class FactConflict(StoreError):
    """A fact is set once: another value was sent for a fact the task already has."""

    def __init__(self, task_id: str, name: str) -> None:
        self.task_id = task_id
        self.name = name
        super().__init__(
            f"task {task_id!r} already has fact {name!r} with another value (facts are set once)"
        )


class FactTimeout(ChongmingError, TimeoutError):
    """``ctx.wait_for_fact`` gave up: decided once, recorded, and raised again on replay."""

    def __init__(self, task_id: str, name: str, seconds: float) -> None:
        self.task_id = task_id
        self.name = name
        self.seconds = seconds
        super().__init__(f"task {task_id!r} had no fact {name!r} within {seconds:g}s")
