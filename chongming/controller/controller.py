"""``Controller``: registered task names in, supervised runs out.

It never creates or owns an event loop: enter it on whatever loop the host
runs (FastAPI lifespan, aiohttp ``cleanup_ctx``, a worker's ``main()``).
With a store it is one node of a shared plane (see :mod:`chongming.control`):
every transition is written through, reads show every process's tasks, and
control of a task held elsewhere travels as a command.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import anyio

from chongming.clock import SYSTEM_CLOCK, Clock, to_datetime
from chongming.control.apply import apply_command, send_command
from chongming.control.failures import PersistFailures
from chongming.control.location import open_store
from chongming.control.parking import PARK_AFTER, check_park_threshold
from chongming.control.plane import ControlPlane
from chongming.controller.cluster import check_cluster_limits, cluster_slots_for
from chongming.controller.enqueue import (
    EnqueueMany,
    EnqueueRequest,
    build_enqueued,
    store_enqueue,
)
from chongming.controller.host import ControllerHost
from chongming.controller.observers import Observer, wire
from chongming.controller.plane_calls import PlaneCalls, check_facts, send_facts
from chongming.controller.queued import QueuedTask
from chongming.controller.served import ServedVersions
from chongming.controller.statistics import ControllerStats, count_tasks, local_totals
from chongming.controller.support import (
    all_done,
    await_to_the_end,
    let_go,
    package_version,
    wind_down,
)
from chongming.controller.support import owned_buckets as check_owned
from chongming.controller.worker import Retention, Worker, check_retention, worker_of
from chongming.errors import (
    BucketNotOwned,
    ConfigurationError,
    ControllerClosed,
    DuplicateTask,
    TaskNotFound,
)
from chongming.executors.base import Executor
from chongming.pipeline.graph import Pipeline
from chongming.pipeline.run import LivePipelines, PipelineRun
from chongming.pipeline.submit import prepare_pipeline
from chongming.policies.checks import check_seconds
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.outcome import Outcome
from chongming.run.task_run import TaskRun, check_tags
from chongming.scheduler.buckets import BucketPolicy, format_bucket_ranges
from chongming.scheduler.limits import AdmissionLimits
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_limit,
    check_reason,
    check_task_id,
)
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.nodes import Command, CommandKind
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import SPEC_ATTRIBUTE, ExecutorChoice, TaskSpec, durable_needs_store

__all__ = ["Controller"]

_log = logging.getLogger("chongming.controller")
_SUBMITS_PER_YIELD = 16
_NO_STORE = "this controller"
#: How long close() keeps writing pending transitions to the store.
_FLUSH_ON_CLOSE = 10.0
_S = TaskStatus


class _Phase:
    NEW = "new"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Controller(PlaneCalls, EnqueueMany):
    """Supervises tasks submitted by registered name.

    Over any limit a task is ``queued``, never rejected. A paused task keeps
    its slot; a task waiting to retry does not.
    """

    def __init__(
        self,
        *,
        max_parallel: int = 10,
        max_parallel_per_bucket: int | None = None,
        resource_limits: Mapping[str, int] | None = None,
        cluster_limits: Mapping[str, int] | None = None,
        num_buckets: int = 64,
        owner: str | None = None,
        owned_buckets: Iterable[int] | None = None,
        executor: Executor | None = None,
        windows: ControlWindows | None = None,
        registry: TaskRegistry | None = None,
        clock: Clock | None = None,
        artifact_root: Path | None = None,
        keep_finished: int = 10_000,
        max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
        store: TaskStore | str | os.PathLike[str] | None = None,
        lease_ttl: float = 30.0,
        poll_interval: float = 1.0,
        reconcile_interval: float | None = None,
        work: bool = False,
        observers: Iterable[Observer] | None = None,
        park_threshold: float = PARK_AFTER,
        retention: Retention | None = None,
    ) -> None:
        self.limits = AdmissionLimits(
            max_parallel=max_parallel,
            max_parallel_per_bucket=max_parallel_per_bucket,
            resource_limits=dict(resource_limits or {}),
        )
        self.buckets = BucketPolicy(num_buckets)
        self.owned_buckets = check_owned(owned_buckets, num_buckets)
        if owner is not None and (not isinstance(owner, str) or not owner):
            raise ConfigurationError(f"owner must be a non-empty string, got {owner!r}")
        self.owner = owner or default_owner()
        if executor is not None and not isinstance(executor, Executor):
            raise ConfigurationError(f"executor must be an Executor, got {executor!r}")
        if windows is not None and not isinstance(windows, ControlWindows):
            raise ConfigurationError(
                f"windows must be a ControlWindows, got {type(windows).__name__}"
            )
        self.windows = windows or ControlWindows()
        self.registry = registry if registry is not None else TaskRegistry()
        self.clock = clock or SYSTEM_CLOCK
        self.artifact_root = artifact_root
        if isinstance(keep_finished, bool) or not isinstance(keep_finished, int):
            raise ConfigurationError(f"keep_finished must be an int, got {keep_finished!r}")
        if keep_finished < 0:
            raise ConfigurationError("keep_finished must be >= 0")
        self.keep_finished = keep_finished
        self.max_payload_bytes = check_limit(max_payload_bytes)
        self.lease_ttl = check_seconds("Controller", "lease_ttl", lease_ttl)
        self.poll_interval = check_seconds("Controller", "poll_interval", poll_interval)
        if reconcile_interval is None and work:
            # A worker judges dead peers by default, so their unstarted claims come back.
            reconcile_interval = self.lease_ttl
        self.reconcile_interval = (
            None
            if reconcile_interval is None
            else check_seconds("Controller", "reconcile_interval", reconcile_interval)
        )
        self.cluster_limits = check_cluster_limits(cluster_limits)
        self._host = ControllerHost(
            self.limits,
            executor=executor,
            keep_finished=keep_finished,
            leased=self.cluster_limits,
        )
        self._host.park_threshold = check_park_threshold(park_threshold)
        self._owns_store = store is not None and not isinstance(store, TaskStore)
        self._plane: ControlPlane | None = None
        if store is not None:
            if not isinstance(store, TaskStore):
                store = open_store(store)
            self._plane = ControlPlane(
                store,
                owner=self.owner,
                num_buckets=num_buckets,
                owned_buckets=self.owned_buckets,
                apply_command=self._apply_command,
                on_let_go=let_go,
                live_runs=self._host.runs,
                poll_interval=self.poll_interval,
                lease_ttl=self.lease_ttl,
                reconcile_interval=self.reconcile_interval,
                version=package_version(),
                clock=self.clock,
            )
            self._host.attach(self._plane)
        self._phase = _Phase.NEW
        self._closed: asyncio.Future[None] | None = None
        self._submitted_since_yield = 0
        self._worker: Worker | None = None
        plane = self._plane
        self._served = None if plane is None else ServedVersions(plane.store, self.poll_interval)
        self._cluster = cluster_slots_for(
            self.cluster_limits, plane=plane, host=self._host, poll_interval=self.poll_interval
        )
        check_retention(retention, work=work)  # a worker prunes: docs/retention.md
        if work:
            if self._plane is None:
                raise ConfigurationError("work=True needs a store: Controller(store=...)")
            withheld = None if self._cluster is None else self._cluster.blocked
            self._worker = worker_of(self, self._plane, self._host, withheld, retention)
        self._pipelines = LivePipelines()
        self._observers = wire(observers, self.owner, self._host, self._plane)  # metrics, traces

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Open for submissions. Idempotent; not needed inside ``async with``."""
        if self._phase in (_Phase.CLOSING, _Phase.CLOSED):
            raise ControllerClosed("the controller is closed")
        if self._phase == _Phase.OPEN:
            return
        if self._plane is not None:
            await self._plane.start()
        if self._cluster is not None:
            await self._cluster.start()
        if self._worker is not None:
            await self._worker.start()
        self._phase = _Phase.OPEN

    @property
    def store(self) -> TaskStore | None:
        """The store this controller writes through to (``None``: in memory only)."""
        return None if self._plane is None else self._plane.store

    @property
    def persist_failures(self) -> PersistFailures:
        """What the store could not take yet (always empty without a store)."""
        return PersistFailures() if self._plane is None else self._plane.failures()

    async def __aenter__(self) -> Controller:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self, grace: float | None = None, *, close_store: bool | None = None) -> None:
        """Shut down: stop admitting, let running tasks finish for ``grace`` seconds,
        then stop the rest (cooperatively, then as each carrier allows), write
        what is pending to the store and close it if this controller opened it
        (``close_store=True`` closes a store instance that was passed in too).

        Idempotent. Cancellation: the shutdown runs to its end (it is bounded
        by the control windows) and the cancellation is re-raised afterwards,
        so no task, thread or handle is left behind by an impatient caller.
        """
        if grace is not None and (
            isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0
        ):
            raise ConfigurationError(f"grace must be a number >= 0, got {grace!r}")
        if self._phase == _Phase.CLOSED:
            return
        if self._closed is not None:
            await asyncio.shield(self._closed)
            return
        self._phase = _Phase.CLOSING
        loop = asyncio.get_running_loop()
        self._closed = loop.create_future()
        if close_store is None:
            close_store = self._owns_store
        shutdown = loop.create_task(
            self._shutdown(grace or 0.0, close_store), name="chongming:shutdown"
        )
        try:
            await await_to_the_end(shutdown)
        finally:
            self._phase = _Phase.CLOSED
            if not self._closed.done():
                self._closed.set_result(None)

    async def _shutdown(self, grace: float, close_store: bool) -> None:
        """Claims, then what waits, then (after ``grace``) what runs; a worker hands back."""
        reason = "the controller is closing"
        if self._worker is not None:
            self._host.closing = True  # from now on, a claimed run goes back, not on here
            await self._worker.aclose()  # claim nothing more; unstarted claims go back
        self._pipelines.shutdown(reason)  # nodes not started: cancelled, not stopped
        for run in self._host.runs():
            waiting = run.status in (_S.QUEUED, _S.PENDING, _S.BLOCKED, _S.RETRY_WAIT)
            if waiting and not run.hand_back(reason):
                run.shutdown(reason)
        bound = self.windows.stop_grace + self.windows.cancel_window + 0.5
        await wind_down(list(self._host.runs()), reason, grace, bound)
        await self._host.aclose(self.windows.cancel_window)
        if self._cluster is not None:
            await self._cluster.aclose()  # every slot back before the node lets go
        if self._served is not None:
            await self._served.aclose()
        plane = self._plane
        if plane is not None:
            await plane.aclose(timeout=_FLUSH_ON_CLOSE)
            if close_store:
                await plane.store.close()

    def _check_not_closed(self) -> None:
        if self._phase in (_Phase.CLOSING, _Phase.CLOSED):
            raise ControllerClosed("the controller is closed; it accepts no more calls")

    async def _open(self) -> None:
        if self._phase == _Phase.OPEN:
            return
        if self._phase == _Phase.NEW:
            # Open on first use, so `controller = Controller(); await submit()` works.
            await self.start()
            return
        raise ControllerClosed("the controller is closed; it accepts no more calls")

    # -- registration ----------------------------------------------------------------

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        tags: Collection[str] | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        executor: ExecutorChoice | None = None,
        priority: int | None = None,
        version: int | None = None,
        durable: bool | None = None,
        max_resumes: int | None = None,
    ) -> TaskSpec:
        """Allow ``fn`` to be submitted as ``name``. Names, never code, cross boundaries.

        ``version`` makes it ``name@version``: a worker serves each version it
        registers, and a task enqueued for a version runs only where it is.
        ``durable``: its steps are memoised and a dead worker's attempt is
        resumed on another (at most ``max_resumes`` times); see docs/durable.md.
        """
        self._check_not_closed()
        base = getattr(fn, SPEC_ATTRIBUTE, None)
        if self._plane is None and (
            getattr(base, "durable", False) if durable is None else durable
        ):
            raise durable_needs_store(name, _NO_STORE)
        spec = self.registry.register(
            name,
            fn,
            tags=tags,
            retry=retry,
            timeout=timeout,
            executor=executor,
            priority=priority,
            version=version,
            durable=durable,
            max_resumes=max_resumes,
        )
        self._served_changed()
        return spec

    def register_module(self, module: ModuleType) -> list[str]:
        """Register every ``@task`` function defined in ``module``."""
        self._check_not_closed()
        names = self.registry.register_module(module)
        self._served_changed()
        return names

    def _served_changed(self) -> None:
        """A worker registered more after it started: publish it and claim it now."""
        if self._worker is not None:
            self._worker.served_changed()

    # -- submit ----------------------------------------------------------------------

    async def submit(
        self,
        name: str,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        tags: Collection[str] | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        **kwargs: Any,
    ) -> TaskRun:
        """Accept a task; it is ``queued`` (or already starting) when this returns.

        Every check happens before anything is queued: an unknown name, a
        duplicate id, arguments that are not JSON or do not fit the function,
        a bucket this node does not own — each raises its own typed error and
        leaves nothing behind.
        """
        if self._phase != _Phase.OPEN:
            await self._open()
        spec = self.registry.get(name)
        if spec.durable and self._plane is None:
            raise durable_needs_store(spec.name, _NO_STORE)
        if task_id is not None and check_task_id(task_id) in self._host:
            raise DuplicateTask(task_id)
        bucket = None if bucket_key is None else self._bucket_for(bucket_key)
        if tags is not None:
            tags = spec.tags | check_tags(tags)
        run = TaskRun(
            spec,
            args,
            kwargs,
            task_id=task_id,
            name=name,
            label=label,
            retry=retry,
            timeout=timeout,
            executor=spec.executor,
            tags=tags,
            priority=priority,
            bucket=bucket,
            bucket_key=bucket_key,
            owner=self.owner,
            windows=self.windows,
            clock=self.clock,
            artifact_root=self.artifact_root,
            host=self._host,
            max_payload_bytes=self.max_payload_bytes,
        )
        plane = self._plane
        if plane is None:
            self._host.admit(run)
        else:
            await self._admit_durably(run, plane)
        self._submitted_since_yield += 1
        if self._submitted_since_yield >= _SUBMITS_PER_YIELD:
            # A tight submit loop would otherwise hold the event loop for as
            # long as the whole batch takes; yield now and then.
            self._submitted_since_yield = 0
            await asyncio.sleep(0)
        return run

    async def enqueue(
        self,
        name: str,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        tags: Collection[str] | None = None,
        not_before: datetime | None = None,
        idempotency_key: str | None = None,
        version: int | None = None,
        connection: object | None = None,
        facts: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> QueuedTask:
        """Persist a ``queued`` task for whichever node serves ``name`` (see docs/work-queue.md).

        Needs a store; needs no registration (an unregistered name waits,
        visibly, until a worker serves it; a registered one is checked against
        its function now). This controller runs it only if it is itself a
        worker (``work=True``) that claims it. The same ``idempotency_key``
        with the same input returns the existing task (``created`` is False);
        with other input it raises :class:`IdempotencyConflict`.

        ``connection``: your own connection inside your open transaction, on
        the store's database (asyncpg on PostgreSQL; aiosqlite on the SQLite
        store's file): the task exists if and only if your transaction commits.
        ``facts``: facts the task starts with (see :meth:`signal`), written
        right after it by the enqueue that created it (not with ``connection``;
        a duplicate writes none).
        """
        if self._phase != _Phase.OPEN:
            await self._open()
        plane = self._require_plane("enqueue")
        bucket = None if bucket_key is None else self.buckets.bucket_for(bucket_key)
        served = self._served
        if version is None and served and isinstance(name, str) and name not in self.registry:
            version = await served.highest(name, wait=connection is None)
        request = EnqueueRequest(
            name=name,
            args=args,
            kwargs=kwargs,
            task_id=task_id,
            label=label,
            bucket=bucket,
            bucket_key=bucket_key,
            priority=priority,
            tags=tags,
            not_before=not_before,
            idempotency_key=idempotency_key,
            version=version,
        )
        snapshot, transition = build_enqueued(
            request, self.registry, self.clock, self.max_payload_bytes
        )
        check_facts(facts, connection)
        result = await store_enqueue(
            plane.store, snapshot, [transition], connection=connection, observers=self._observers
        )
        if result.created:
            # A duplicate (the key named a twin) changes nothing: its facts
            # were the first enqueue's to write.
            await send_facts(plane.store, result.snapshot.task_id, facts)
        if self._worker is not None:
            self._worker.wake()
        return QueuedTask(
            plane.store, result.snapshot, created=result.created, poll=self.poll_interval
        )

    async def _admit_durably(self, run: TaskRun, plane: ControlPlane) -> None:
        """Queue ``run`` only once the store holds it; if it cannot, leave nothing behind.

        Cancellation: the creation is awaited to its end first (it may have
        committed); a created task runs, and the cancellation is re-raised.
        """
        await plane.become_node()  # a second live node under this owner name is refused here
        host = self._host
        host.register(run)
        run.mark_queued()
        creation = asyncio.ensure_future(plane.writer.created(run))
        cancelled = False
        # anyio re-delivers a scope's cancellation at every await: shield from it
        # while the outcome settles (the store bounds how long that takes).
        with anyio.CancelScope(shield=True):
            while not creation.done():
                try:
                    await asyncio.shield(creation)
                except asyncio.CancelledError:
                    cancelled = True  # re-raised once the outcome is settled
                except Exception:
                    break
        error = creation.exception()
        if error is not None:
            host.forget(run)
            plane.writer.forget(run)
            raise error
        run.enter_admission()
        if cancelled:
            raise asyncio.CancelledError

    async def submit_pipeline(
        self, pipeline: Pipeline, *, run_id: str | None = None
    ) -> PipelineRun:
        """Start ``pipeline``: its roots ``queued``, every other node ``blocked``.

        Everything is checked before any node exists (the graph, the task
        names, each node's arguments, ids in use); node task ids are
        ``<run_id>:<node_id>`` (``run_id`` defaults to a fresh random id).
        With a store it returns once every node is durable; if one cannot
        be stored, the stored ones are cancelled and the store's error is
        raised. Cancellation: as for :meth:`submit`, the admission is
        finished first; an admitted pipeline runs, and the cancellation is
        re-raised.
        """
        if self._phase != _Phase.OPEN:
            await self._open()
        handle = prepare_pipeline(pipeline, self.registry, self._node_run, run_id=run_id)
        plane = self._plane
        if plane is not None:
            await plane.become_node()
        admission = asyncio.get_running_loop().create_task(
            handle.admit(self._host, None if plane is None else plane.writer, self._pipelines),
            name=f"chongming:admit-pipeline:{handle.run_id}",
        )
        await await_to_the_end(admission)
        return handle

    def _node_run(
        self,
        spec: TaskSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        task_id: str,
        label: str,
    ) -> TaskRun:
        if spec.durable and self._plane is None:
            raise durable_needs_store(spec.name, _NO_STORE)
        return TaskRun(
            spec,
            args,
            kwargs,
            task_id=task_id,
            name=spec.name,
            label=label,
            executor=spec.executor,
            owner=self.owner,
            windows=self.windows,
            clock=self.clock,
            artifact_root=self.artifact_root,
            host=self._host,
            max_payload_bytes=self.max_payload_bytes,
        )

    def _bucket_for(self, bucket_key: str | None) -> int | None:
        if bucket_key is None:
            return None
        bucket = self.buckets.bucket_for(bucket_key)
        if self.owned_buckets is not None and bucket not in self.owned_buckets:
            raise BucketNotOwned(bucket, format_bucket_ranges(self.owned_buckets))
        return bucket

    # -- queries -------------------------------------------------------------------------

    def run_for(self, task_id: str) -> TaskRun:
        """The live handle of a task this controller holds."""
        self._check_not_closed()
        run = self._host.get(task_id)
        if run is None:
            raise TaskNotFound(task_id)
        return run

    async def get(self, task_id: str) -> TaskSnapshot:
        """The task's latest snapshot; :class:`TaskNotFound` if unknown.

        A task this controller holds is read from memory (fresher: progress
        and heartbeat are only written now and then); any other is read
        from the store.
        """
        self._check_not_closed()
        run = self._host.get(task_id)
        if run is not None:
            return run.snapshot
        if self._plane is not None:
            await self._open()
            snapshot = await self._plane.store.get(task_id)
            if snapshot is not None:
                return snapshot
        raise TaskNotFound(task_id)

    async def history(self, task_id: str) -> list[Transition]:
        """The task's transitions, oldest first (from the store for tasks held elsewhere)."""
        self._check_not_closed()
        run = self._host.get(task_id)
        if run is not None:
            return list(run.transitions)
        if self._plane is not None:
            await self._open()
            history = await self._plane.store.history(task_id)
            if history:
                return history
        raise TaskNotFound(task_id)

    async def list_tasks(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        """Snapshots matching ``query``, oldest first.

        With a store: every process's tasks, from the store, with the
        fresher in-memory snapshot in place of each task held here.
        """
        self._check_not_closed()
        query = query or TaskQuery()
        if self._plane is not None:
            await self._open()
            stored = await self._plane.store.query(query)
            held = self._host
            return [
                run.snapshot if (run := held.get(snapshot.task_id)) is not None else snapshot
                for snapshot in stored
            ]
        result: list[TaskSnapshot] = []
        for run in self._host.runs():
            snapshot = run.snapshot
            if query.matches(snapshot):
                result.append(snapshot)
                if query.limit is not None and len(result) >= query.limit:
                    break
        return result

    async def stats(self) -> ControllerStats:
        """Counts now: with a store, the task counts are every node's, read from the store
        (this node's unwritten transitions counted where they are); see :class:`ControllerStats`.
        """
        self._check_not_closed()
        if self._plane is None:
            totals = local_totals(self._host.counts())
        else:
            await self._open()
            counts = await self._plane.store.task_counts()
            totals = count_tasks(counts, self._plane.writer.unwritten())
        admission = self._host.admission()
        return ControllerStats(
            total=totals.total,
            active=totals.active,
            by_status=totals.by_status,
            by_owner=totals.by_owner,
            held=len(self._host),
            queued=admission.waiting,
            holding_slot=admission.running,
            max_parallel=self.limits.max_parallel,
            per_bucket=dict(admission.running_per_bucket),
            per_resource=dict(admission.running_per_resource),
            persist_failures=self.persist_failures.failed_writes,
            cluster_slots={} if self._cluster is None else self._cluster.held,
        )

    # -- control -------------------------------------------------------------------------

    async def stop(self, task_id: str, *, reason: str | None = None, actor: str = "user") -> bool:
        """Ask a task to stop; see :meth:`TaskRun.stop`. False if it already ended.

        A task held by another process gets a stop command addressed to its
        owner; True then means the request was issued.
        """
        self._check_not_closed()
        run = self._host.get(task_id)
        if run is not None:
            return await run.stop(reason=reason, actor=actor)
        return await self._command(CommandKind.STOP, task_id, reason, actor)

    async def pause(self, task_id: str, *, reason: str | None = None, actor: str = "user") -> bool:
        """Pause a task at its next checkpoint; False (rolled back) if not reached in time.

        For a task held by another process a pause command is sent and the
        answer is False: unconfirmed (the command's recorded outcome says
        what happened).
        """
        self._check_not_closed()
        run = self._host.get(task_id)
        if run is not None:
            return await run.pause(reason=reason, actor=actor)
        await self._command(CommandKind.PAUSE, task_id, reason, actor)
        return False

    async def resume(self, task_id: str, *, reason: str | None = None, actor: str = "user") -> bool:
        """Resume a paused task; False if it was not paused (or, held elsewhere: unconfirmed)."""
        self._check_not_closed()
        run = self._host.get(task_id)
        if run is not None:
            return await run.resume(reason=reason, actor=actor)
        await self._command(CommandKind.RESUME, task_id, reason, actor)
        return False

    async def _command(
        self, kind: CommandKind, task_id: str, reason: str | None, actor: str
    ) -> bool:
        """Address a command to the task's owner; False when the task already ended."""
        check_task_id(task_id)
        reason = check_reason(reason)
        check_reason(actor, "actor")
        plane = self._plane
        if plane is None:
            raise TaskNotFound(task_id)
        await self._open()
        at = to_datetime(self.clock.time())
        return await send_command(plane.store, kind, task_id, reason=reason, actor=actor, at=at)

    async def _apply_command(self, command: Command) -> str | None:
        plane = self._plane
        assert plane is not None
        outcome = await apply_command(
            command, held=self._host.get, store=plane.store, owner=self.owner
        )
        if self._observers is not None:
            # The injected clock, as every other time of the controller (a test pins it).
            seconds = max(0.0, self.clock.time() - command.created_at.timestamp())
            self._observers.command_applied(command, outcome, seconds)
        return outcome

    async def stop_all(self, *, reason: str | None = None, actor: str = "user") -> int:
        """Ask every unfinished task to stop. Returns how many requests were issued,
        not how many tasks have stopped: use :meth:`wait_all` for that."""
        self._check_not_closed()
        issued = 0
        for run in self._host.runs():
            if await run.stop(reason=reason, actor=actor):
                issued += 1
        return issued

    async def wait_all(self, timeout: float | None = None) -> list[Outcome]:
        """Wait until every task known now has ended; their outcomes in submission order.

        Raises :class:`TimeoutError` if that takes longer than ``timeout``;
        nothing about the tasks changes then.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
        ):
            raise ConfigurationError(f"timeout must be a number >= 0, got {timeout!r}")
        self._check_not_closed()
        runs = list(self._host.runs())
        async with asyncio.timeout(timeout):
            await all_done(runs)
            # Outcomes are handed out once their ends are durable (see TaskRun.wait).
            settled = [future for run in runs if (future := self._host.settled(run)) is not None]
            if settled:
                await asyncio.shield(asyncio.gather(*settled))
        return [outcome for run in runs if (outcome := run.outcome) is not None]

    def __repr__(self) -> str:
        return f"<Controller owner={self.owner!r} {self._phase} tasks={len(self._host)}>"
