"""The worker half of a controller (``work=True``): claim queued tasks, run them here.

A claimed task becomes an ordinary local run that continues the stored
trajectory (``queued`` at the stored version, then ``starting`` by
``scheduler:dispatch`` and on), so stop, pause, resume, timeouts, retries and
reconcile behave exactly as for a task submitted here. The claim loop takes
no more than this node has free slots; a task the node cannot run after all
(its arguments no longer fit the registered function) ends ``failed`` with
kind ``launch_error`` instead of coming back forever.

When admission would launch whatever is claimed at once (no per-bucket,
resource or cluster limit, nothing waiting for a slot), the claim also writes
``starting`` (:meth:`TaskStore.claim_started`): one statement claims, starts
and reads the histories, and the launch waits for no write of its own. With
rate limits the claim is :meth:`TaskStore.claim_granted` instead: the grants
are decided inside it and only what was granted starts. Under admission
limits a claimed task may have to wait for a slot, so it is claimed
``queued`` (rate-limited tags asking for their grants then) and started by
admission as before.

A worker whose observers follow trace carriers (tracing) reads the carriers
its claim took after each claim (:meth:`TaskStore.trace_carriers`, one read
per claim) and hands each to the observers with its run, so the attempt
continues the trace its enqueue was made in. The claim itself never reads
them, and a failing read only costs the traces (logged; the tasks run).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from chongming.clock import SYSTEM_CLOCK, Clock, to_datetime
from chongming.controller.claim_returns import give_back_start, patiently, refuse_claim
from chongming.controller.pools import WorkerPool
from chongming.controller.rates import check_rate_store
from chongming.controller.schedules import schedule_loop_for
from chongming.controller.stored_pipelines import (
    COORDINATOR_RESUMES,
    PIPELINE_TASK,
    coordinate,
    node_inputs,
)
from chongming.errors import (
    ChongmingError,
    ConfigurationError,
)
from chongming.plane.claims import ClaimLoop
from chongming.plane.pruner import BackgroundPruner, check_retention, pruner_for
from chongming.plane.rate_gate import RateGate, claim_exclusions
from chongming.state.machine import apply_transition
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import ACTIVE_STATUSES, TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from chongming.stores.granted import GrantAsk
from chongming.stores.queue import ClaimedTask, Serves
from chongming.stores.rates import RateLimit
from chongming.stores.retention import Retention
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import TaskSpec

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.controller.host import ControllerHost
    from chongming.plane.cluster_slots import ClusterSlots
    from chongming.plane.plane import ControlPlane
    from chongming.run.task_run import TaskRun
    from chongming.schedules.loop import ScheduleLoop

__all__ = ["Retention", "Worker", "check_retention", "worker_of"]

_log = logging.getLogger("chongming.control")
_T = TypeVar("_T")

#: How long a closing worker waits for a retry_wait to be stored before handing it back.
HAND_BACK_WAIT = 5.0


class Worker:
    """Owned by its controller: started when the controller opens, closed first on close."""

    def __init__(
        self,
        plane: ControlPlane,
        host: ControllerHost,
        registry: TaskRegistry,
        *,
        owner: str,
        max_parallel: int,
        owned_buckets: frozenset[int] | None,
        make_run: Callable[[TaskSpec, TaskSnapshot, Mapping[str, Any] | None], TaskRun],
        poll_interval: float,
        withheld: Callable[[], frozenset[str]] | None = None,
        exclude_tags: Callable[[], Collection[str]] | None = None,
        unlimited: bool = False,
        clock: Clock | None = None,
        pruner: BackgroundPruner | None = None,
        rate_limits: Mapping[str, RateLimit] | None = None,
        pool: WorkerPool | None = None,
        schedules: ScheduleLoop | None = None,
    ) -> None:
        #: The scheduler loop this worker runs beside its claims (docs/schedules.md).
        self.schedules = schedules
        self._plane = plane
        self._pool = pool or WorkerPool()
        self._rates = (
            RateGate(plane.store, rate_limits, wake=self.wake, poll_interval=poll_interval)
            if rate_limits
            else None
        )
        # Claim ``starting`` only when admission launches at once (see the module docstring).
        store = plane.store
        # Rate-limited: the claim takes its grants and starts only what was granted.
        self._starts = (
            unlimited
            and type(store).claim_started is not TaskStore.claim_started
            and (
                self._rates is None
                or type(store).claim_granted is not TaskStore.claim_granted
                or type(store).start_claimed is not TaskStore.start_claimed
            )
        )
        self._time = time.time if clock is None or clock is SYSTEM_CLOCK else clock.time
        self._withheld = withheld
        self._host = host
        self._registry = registry
        self._owner = owner
        self._max_parallel = max_parallel
        self._make_run = make_run
        self._carriers_failed = False
        self._pruner = pruner  # retention=: owned here, started and closed with the claims
        self._claims = ClaimLoop(
            plane.store,
            owner=owner,
            serves=self.claimable,
            buckets=owned_buckets,
            free_slots=self.free_slots,
            adopt=self.adopt,
            poll_interval=poll_interval,
            exclude_tags=claim_exclusions(exclude_tags, self._pool.excluded, self._rates),
            start_at=self.start_at,
            adopt_started=self.adopt_started,
            tags=self._pool.tags,
            age_step=self._pool.age_step,
            claim_started=None if self._rates is None else self._claim_granted,
        )

    @property
    def claimed(self) -> int:
        """Tasks this worker has claimed so far."""
        return self._claims.claimed

    async def start(self) -> None:
        self._plane.node.serves = self.served_names  # published in the node row
        self._plane.max_resumes_of = self.max_resumes_of  # reconcile knows durable tasks
        await self._plane.become_node()  # claims are made by a live node only
        if self._rates is not None:
            await self._rates.start()
            self._host.retry_requeue = self._retry_through_queue
        self._host.on_finished = self._claims.wake
        self._host.parking = True  # a claimed durable task may park for a long sleep
        self._claims.start()
        if self._pruner is not None:
            self._pruner.start()
        if self.schedules is not None:
            self.schedules.start()

    def wake(self) -> None:
        self._claims.wake()

    def served_changed(self) -> None:
        """A registration after start: the node row says so at once, and claims include it."""
        self._plane.node.publish()
        self._claims.wake()
        if self.schedules is not None:
            self.schedules.wake()  # a @task(schedule=...) registered late is put now

    async def aclose(self) -> None:
        """Claim nothing more; give back what was claimed but has not started.

        That includes a claimed task waiting out a retry backoff here: it goes
        back to the queue (``retry_wait -> queued``, no owner, claimable when
        its backoff ends), so another worker runs the retry it was owed
        instead of the closing host stopping it.
        """
        self._host.on_finished = None
        if self._pruner is not None:
            await self._pruner.aclose()
        self._host.retry_requeue = None
        if self.schedules is not None:
            await self.schedules.aclose()
        await self._claims.aclose()
        if self._rates is not None:
            self._rates.aclose()
        store = self._plane.store
        for run in self._host.runs():
            if run.adopted is None or run.holds_slot:
                continue
            status = run.status
            if status is TaskStatus.RETRY_WAIT:
                await self._hand_back_retry(run)
                continue
            if status is not TaskStatus.QUEUED and status is not TaskStatus.STARTING:
                continue
            snapshot = run.snapshot
            self._host.forget(run)  # out of admission, its start timer cancelled
            self._plane.writer.forget(run)
            if status is TaskStatus.STARTING:  # its claim started it; it waited for a slot
                await give_back_start(store, self._owner, self._now(), snapshot, patience=0)
                continue
            try:
                await store.release_claim(run.task_id, self._owner, snapshot.status_version)
            except ChongmingError as error:
                # Still ours in the store: reconcile sees a dead owner's queued task.
                _log.warning("could not give %r back to the queue: %s", run.task_id, error)

    def _retry_through_queue(self, run: TaskRun) -> str | None:
        """A claimed rate-limited task's retry is a start too: it goes back to the queue.

        Decided with the retry, when the attempt ends (before any timer of
        this node could start it): requeued (``retry_wait -> queued``, no
        owner, claimable when its backoff ends), the next attempt is claimed
        again and asks for its grant like the first one, instead of
        restarting here past the limit.
        """
        rates = self._rates
        if rates is None or not run.tags & rates.tags:
            return None
        return "rate limited: the retry asks for its start grant again"

    async def _hand_back_retry(self, run: TaskRun) -> None:
        """A claimed task in ``retry_wait`` on a closing worker: back to the queue, unowned."""
        try:  # the store must hold its retry_wait before the hand-back can compare on it
            async with asyncio.timeout(HAND_BACK_WAIT):
                durable = await self._plane.writer.durable(run, run.status_version)
        except TimeoutError:
            durable = False
        if not durable or run.status is not TaskStatus.RETRY_WAIT:
            return  # left to the closing host, as any run it holds
        due = run.retry_due_at
        snapshot = run.snapshot
        self._host.forget(run)  # its retry timer cancelled: the retry is not ours any more
        self._plane.writer.forget(run)
        now = to_datetime(self._time())
        queued, transition = apply_transition(
            snapshot,
            TaskStatus.QUEUED,
            trigger=Trigger.RETRY_RELEASED,
            at=now,
            reason="the worker closed: the retry goes to any worker that serves it",
        )
        not_before = None if due is None else to_datetime(due)
        queued = dataclasses.replace(queued, owner=None, not_before=not_before)
        try:
            await self._plane.store.save(
                queued, expect_version=snapshot.status_version, transitions=[transition]
            )
        except ChongmingError as error:
            # Still ours in the store: reconcile requeues a dead worker's retry_wait task.
            _log.warning("could not give %r back to the queue: %s", run.task_id, error)

    def _now(self) -> datetime:
        return to_datetime(self._time())

    def serves(self) -> Serves:
        """Every registered name with the versions registered for it, within the pool."""
        registry = self._registry
        return self._pool.restrict({name: registry.versions(name) for name in registry.names})

    def claimable(self) -> Serves:
        """What to claim now: what it serves, less the registrations whose tags are withheld.

        A tag is withheld while a task carrying it waits here for a cluster
        slot: claiming more of them would only park them in this node.
        """
        serves = self.serves()
        withheld = self._withheld() if self._withheld is not None else frozenset()
        if self._rates is not None:
            withheld |= self._rates.blocked()
        if not withheld:
            return serves
        registry = self._registry
        claimable: dict[str, list[int | None]] = {}
        for name, versions in serves.items():
            free = [v for v in versions if not registry.get(name, v).tags & withheld]
            if free:
                claimable[name] = free
        return claimable

    def max_resumes_of(self, name: str, version: int | None) -> int | None:
        """The ``max_resumes`` of ``name@version`` if registered here durable, else ``None``."""
        try:
            spec = self._registry.get(name, version)
        except ChongmingError:
            return None
        return spec.max_resumes if spec.durable else None

    def served_names(self) -> frozenset[str]:
        """What this worker serves as the node row says it: ``name`` or ``name@N``."""
        return frozenset(
            name if version is None else f"{name}@{version}"
            for name, versions in self.serves().items()
            for version in versions
        )

    def free_slots(self) -> int:
        counts = self._host.counts()
        active = sum(counts[status] for status in ACTIVE_STATUSES)
        return self._max_parallel - active

    def start_at(self) -> datetime | None:
        """When the next claim may start what it takes: now, if admission launches it at once."""
        if not self._starts or self._host.admission().waiting:
            return None
        return to_datetime(self._time())

    def _tags_of(self, stored: TaskSnapshot) -> frozenset[str]:
        """The tags a claimed task runs with here: its own and its registration's."""
        return self._registered_tags(stored.name, stored.version, stored.tags)

    async def adopt(self, claimed: list[TaskSnapshot]) -> None:
        """Run claimed tasks here, each continuing its stored trajectory."""
        store = self._plane.store
        if self._rates is not None:  # what the rate limits do not let start goes back now
            claimed = await self._rates.gate(claimed, self._tags_of, owner=self._owner)
            if not claimed:
                return
        try:
            histories = await store.histories([s.task_id for s in claimed])
        except ChongmingError:
            # Nothing was adopted: give the claims back rather than hold them unrun.
            for stored in claimed:
                try:
                    await store.release_claim(stored.task_id, self._owner, stored.status_version)
                except ChongmingError:
                    pass  # still ours in the store: reconcile requeues it if we die
            raise
        carriers = await self._carriers([s.task_id for s in claimed])
        for stored in claimed:
            if self._answered_twice(stored):
                continue  # adopted already (a claim re-answered after a connection error)
            await self._take(stored, histories[stored.task_id], carriers.get(stored.task_id))

    async def _claim_granted(self, owner: str, **claim: Any) -> list[ClaimedTask]:
        """A started claim through the rate limits: the store starts only what it grants."""
        rates = self._rates
        assert rates is not None
        ask = GrantAsk(limited=rates.tags - rates.blocked(), tags_of=self._registered_tags)
        answer = await self._plane.store.claim_granted(owner, grants=ask, **claim)
        rates.decided(answer.grants, answer.refused)
        return answer.started

    def _registered_tags(
        self, name: str, version: int | None, tags: frozenset[str]
    ) -> frozenset[str]:
        try:
            return tags | self._registry.get(name, version).tags
        except ChongmingError:
            return tags

    async def adopt_started(self, claimed: list[ClaimedTask]) -> None:
        """Run tasks their claim started here: admission launches each as it is."""
        carriers = await self._carriers([task.snapshot.task_id for task in claimed])
        for task in claimed:
            await self._take(task.snapshot, task.history, carriers.get(task.snapshot.task_id))

    async def _carriers(self, task_ids: list[str]) -> dict[str, dict[str, str]]:
        """The trace carriers of claimed tasks, if an observer follows them (else no read)."""
        observer = self._host.observer
        if observer is None or not observer.follows_carriers:
            return {}
        try:
            return await self._plane.store.trace_carriers(task_ids)
        except Exception as error:  # tracing never keeps a claimed task from running
            log = _log.debug if self._carriers_failed else _log.warning
            self._carriers_failed = True
            log("reading the trace carriers of claimed tasks failed (%s); they run untraced", error)
            return {}

    def _answered_twice(self, stored: TaskSnapshot) -> bool:
        """This claim of ``stored`` was adopted here already (a live run took it at its version)."""
        held = self._host.get(stored.task_id)
        return (
            held is not None
            and not held.done
            and held.adopted is not None
            and held.adopted.status_version == stored.status_version
        )

    def _drop_ended(self, task_id: str) -> None:
        """Forget a run of ``task_id`` that ended here: the store gave the task back to us.

        A durable task this node ran may come back to it: its attempt here was
        fenced or let go (reconciled by another node while the store was away,
        say) and the task went back to the queue. The run kept among the
        finished ones is history; the new claim is the task now (a run still
        live here is not dropped: :meth:`_take` gives that claim back).
        """
        held = self._host.get(task_id)
        if held is not None and held.done:
            self._host.forget(held)
            self._plane.writer.forget(held)

    async def _take(
        self,
        stored: TaskSnapshot,
        history: Sequence[Transition],
        carrier: Mapping[str, str] | None = None,
    ) -> None:
        """One claimed task (``queued``, or ``starting`` by its claim) as a run of this host."""
        self._drop_ended(stored.task_id)
        try:
            spec = self._registry.get(stored.name, stored.version)
            upstream = await node_inputs(self._plane.store, stored)  # a stored pipeline's node
            run = self._make_run(spec, stored, upstream)
            run.adopt(stored, history)
        except (ChongmingError, ValueError) as error:
            queued_by = history[-1].trigger if history else None
            await refuse_claim(
                self._plane.store,
                to_datetime(self._time()),
                stored,
                f"cannot run it here: {error}",
                queued_by,
            )
            return
        try:
            self._host.register(run)
        except ChongmingError as error:  # the id is held here already: not ours to run twice
            run.discard()
            _log.warning("claimed %r but cannot hold it (%s); giving it back", run.task_id, error)
            if stored.status is TaskStatus.STARTING:
                await give_back_start(
                    self._plane.store, self._owner, to_datetime(self._time()), stored
                )
                return
            store = self._plane.store
            try:
                await patiently(
                    lambda: store.release_claim(stored.task_id, self._owner, stored.status_version)
                )
            except ChongmingError as failed:
                _log.warning("could not give %r back to the queue: %s", stored.task_id, failed)
            return
        if carrier and self._host.observer is not None:
            self._host.observer.claimed(run, carrier)  # before its first attempt: the parent
        self._plane.writer.adopt(run, stored.status_version)
        run.enter_admission()


def worker_of(
    controller: Controller,
    plane: ControlPlane | None,
    host: ControllerHost,
    cluster: ClusterSlots | None,
    retention: Retention | None = None,
) -> Worker:
    """The worker half of ``controller`` (``work=True``), wired to its plane and host."""
    if plane is None:
        raise ConfigurationError("work=True needs a store: Controller(store=...)")
    options = controller.worker_options
    assert options is not None, "a worker's options are checked when it is made"
    check_rate_store(options.rate_limits, plane.store)
    if PIPELINE_TASK not in controller.registry:  # every worker may coordinate a pipeline
        controller.registry.register(
            PIPELINE_TASK, coordinate, durable=True, max_resumes=COORDINATOR_RESUMES
        )
    withheld = None if cluster is None else cluster.blocked
    limits = controller.limits
    return Worker(
        plane,
        host,
        controller.registry,
        owner=controller.owner,
        max_parallel=controller.limits.max_parallel,
        owned_buckets=controller.owned_buckets,
        make_run=controller.run_factory.claimed,
        poll_interval=controller.poll_interval,
        withheld=withheld,
        exclude_tags=withheld,  # and tasks enqueued with such a tag of their own
        unlimited=(
            limits.max_parallel_per_bucket is None
            and not limits.resource_limits
            and not controller.cluster_limits
        ),
        clock=controller.clock,
        pruner=pruner_for(retention, plane.store, clock=controller.clock),
        rate_limits=options.rate_limits,
        pool=options.pool,
        schedules=schedule_loop_for(
            plane.store, controller.registry, controller.clock, controller.max_payload_bytes
        ),
    )
