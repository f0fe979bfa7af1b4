"""``Controller``: registered task names in, supervised runs out.

It never creates or owns an event loop: enter it on whatever loop the host
runs (FastAPI lifespan, aiohttp ``cleanup_ctx``, a worker's ``main()``).
With a store it is one node of a shared plane (see :mod:`chongming.plane`):
every transition is written through, reads show every process's tasks, and
control of a task held elsewhere travels as a command.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from chongming.clock import SYSTEM_CLOCK, Clock
from chongming.controller.enqueue import (
    EnqueueCalls,
)
from chongming.controller.host import ControllerHost
from chongming.controller.observers import Observer, wire
from chongming.controller.pipeline_calls import PipelineCalls
from chongming.controller.plane_calls import PlaneCalls
from chongming.controller.run_factory import RunFactory
from chongming.controller.submit_calls import NO_STORE, SubmitCalls
from chongming.controller.support import (
    Phase,
    await_to_the_end,
    let_go,
    package_version,
    wind_down,
)
from chongming.controller.support import owned_buckets as check_owned
from chongming.controller.task_calls import TaskCalls
from chongming.errors import (
    ConfigurationError,
    ControllerClosed,
)
from chongming.executors.base import Executor
from chongming.pipeline.run import LivePipelines
from chongming.plane.parking import PARK_AFTER, check_park_threshold
from chongming.policies.checks import check_seconds
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.scheduler.buckets import BucketPolicy
from chongming.scheduler.limits import AdmissionLimits
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_limit,
)
from chongming.state.status import TaskStatus
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import SPEC_ATTRIBUTE, ExecutorChoice, TaskSpec, durable_needs_store

if TYPE_CHECKING:
    # A controller without a store never imports the control plane, the store
    # port or the worker: `from chongming import Controller` stays cheap.
    from chongming.controller.served import ServedVersions
    from chongming.controller.worker import Worker
    from chongming.controller.worker_options import RateLimit, WorkerOptions, WorkerPool
    from chongming.plane.cluster_slots import ClusterSlots
    from chongming.plane.plane import ControlPlane
    from chongming.stores.base import TaskStore
    from chongming.stores.retention import Retention

__all__ = ["Controller"]

_log = logging.getLogger("chongming.controller")
#: How long close() keeps writing pending transitions to the store.
_FLUSH_ON_CLOSE = 10.0
_S = TaskStatus


def _cluster_limits(limits: object) -> dict[str, int]:
    if limits is None:
        return {}
    from chongming.controller.cluster import check_cluster_limits

    return check_cluster_limits(limits)


def _worker_options(rate_limits: object, pool: object, *, work: bool) -> WorkerOptions | None:
    """Checked when a worker's options are given (or it is a worker); else none to keep."""
    if rate_limits is None and pool is None and not work:
        return None
    from chongming.controller.worker_options import check_worker_options

    return check_worker_options(rate_limits, pool, work=work)


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Controller(SubmitCalls, TaskCalls, EnqueueCalls, PipelineCalls, PlaneCalls):
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
        rate_limits: Mapping[str, str | RateLimit] | None = None,
        pool: WorkerPool | None = None,
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
        self.cluster_limits = _cluster_limits(cluster_limits)
        self.worker_options = _worker_options(rate_limits, pool, work=work)
        self._host = ControllerHost(
            self.limits,
            executor=executor,
            keep_finished=keep_finished,
            leased=self.cluster_limits,
        )
        self._host.park_threshold = check_park_threshold(park_threshold)
        self._host.task_plane = self
        #: Makes every run of this controller: submitted, a pipeline's node, claimed.
        self.run_factory = RunFactory(
            owner=self.owner,
            windows=self.windows,
            clock=self.clock,
            artifact_root=self.artifact_root,
            host=self._host,
            max_payload_bytes=self.max_payload_bytes,
        )
        self._owns_store = False
        self._plane: ControlPlane | None = None
        if store is not None:
            self._plane, self._owns_store = self._plane_on(store, num_buckets)
            self._host.attach(self._plane)
        self._phase = Phase.NEW
        self._closed: asyncio.Future[None] | None = None
        self._submitted_since_yield = 0
        plane = self._plane
        self._served: ServedVersions | None = None
        self._cluster: ClusterSlots | None = None
        if plane is not None:
            from chongming.controller.served import ServedVersions

            self._served = ServedVersions(plane.store, self.poll_interval)
        if self.cluster_limits:  # checked here: they need a store that has them
            from chongming.controller.cluster import cluster_slots_for

            self._cluster = cluster_slots_for(
                self.cluster_limits, plane=plane, host=self._host, poll_interval=self.poll_interval
            )
        self._worker: Worker | None = None
        if retention is not None or work:
            from chongming.controller.worker import check_retention, worker_of

            check_retention(retention, work=work)  # a worker prunes: docs/retention.md
            if work:
                self._worker = worker_of(self, plane, self._host, self._cluster, retention)
        self._pipelines = LivePipelines()
        self._observers = wire(observers, self.owner, self._host, self._plane)  # metrics, traces

    def _plane_on(
        self, store: TaskStore | str | os.PathLike[str], num_buckets: int
    ) -> tuple[ControlPlane, bool]:
        """This node's plane on ``store`` (an instance, or a path or URL it opens and owns)."""
        from chongming.plane.location import open_store
        from chongming.plane.plane import ControlPlane
        from chongming.stores.base import TaskStore

        owns = not isinstance(store, TaskStore)
        plane = ControlPlane(
            store if isinstance(store, TaskStore) else open_store(store),
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
        return plane, owns

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Open for submissions. Idempotent; not needed inside ``async with``."""
        if self._phase in (Phase.CLOSING, Phase.CLOSED):
            raise ControllerClosed("the controller is closed")
        if self._phase == Phase.OPEN:
            return
        if self._plane is not None:
            await self._plane.start()
        if self._cluster is not None:
            await self._cluster.start()
        if self._worker is not None:
            await self._worker.start()
        self._phase = Phase.OPEN

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
        if self._phase == Phase.CLOSED:
            return
        if self._closed is not None:
            await asyncio.shield(self._closed)
            return
        self._phase = Phase.CLOSING
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
            self._phase = Phase.CLOSED
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
        if self._phase in (Phase.CLOSING, Phase.CLOSED):
            raise ControllerClosed("the controller is closed; it accepts no more calls")

    async def _open(self) -> None:
        if self._phase == Phase.OPEN:
            return
        if self._phase == Phase.NEW:
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
            raise durable_needs_store(name, NO_STORE)
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

    def __repr__(self) -> str:
        return f"<Controller owner={self.owner!r} {self._phase} tasks={len(self._host)}>"
