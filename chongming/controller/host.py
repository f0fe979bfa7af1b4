"""The controller's host role: admission, counts, retiring finished runs, owned tasks.

Private to the controller. Runs call back into it (the :class:`RunHost`
protocol); users never see it, so nobody can release a slot they do not
hold. :meth:`ControllerHost.record` is the one place every transition of
every run passes through: where counts change and where write-through
attaches.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

from chongming.errors import ControllerClosed, DuplicateTask, StoreError
from chongming.executors.base import Executor
from chongming.executors.thread import ThreadExecutor
from chongming.plane.parking import PARK_AFTER
from chongming.run.defaults import resolve_executor
from chongming.run.host import HostedRun, OwnedTasks
from chongming.run.task_run import TaskRun
from chongming.scheduler.admission import AdmissionQueue
from chongming.scheduler.limits import AdmissionLimits, AdmissionStatistics
from chongming.state.status import TERMINAL_STATUSES, TaskStatus
from chongming.task_api.spec import TaskSpec

if TYPE_CHECKING:
    from chongming.controller.observers import Observers
    from chongming.plane.plane import ControlPlane

__all__ = ["ControllerHost"]

_log = logging.getLogger("chongming.control")

_TERMINAL = TERMINAL_STATUSES


class ControllerHost:
    """Hosts a controller's runs; see the module docstring."""

    __slots__ = (
        "_default_executor",
        "_finished",
        "_max_parallel",
        "_observer",
        "_owned_executors",
        "_plane",
        "_queue",
        "_runs",
        "_tasks",
        "_threads",
        "closing",
        "gated",
        "keep_finished",
        "on_demand",
        "on_finished",
        "park_threshold",
        "parking",
        "per_status",
        "retry_requeue",
        "sink",
        "task_plane",
    )

    def __init__(
        self,
        limits: AdmissionLimits,
        *,
        executor: Executor | None,
        keep_finished: int,
        leased: Collection[str] = (),
    ) -> None:
        # Of HostedRun. Leased tags: cluster-wide limits (plane/cluster_slots.py).
        self._queue: AdmissionQueue[Any] = AdmissionQueue(limits, leased=leased)
        self._max_parallel = max(limits.max_parallel, 1)
        self._runs: dict[str, TaskRun] = {}
        self._finished: collections.deque[str] = collections.deque()
        #: Runs per status: each run moves its own count on every transition.
        self.per_status: dict[TaskStatus, int] = dict.fromkeys(TaskStatus, 0)
        #: What every transition passes through (None: nothing listens); see _compose_sink.
        self.sink: Callable[[Any, TaskStatus], None] | None = None
        self._tasks = OwnedTasks()
        self._owned_executors: list[Executor] = []
        if executor is None:
            executor = ThreadExecutor(max_workers=self._max_parallel)
            self._owned_executors.append(executor)
        self._default_executor = executor
        self._threads: ThreadExecutor | None = (
            executor if isinstance(executor, ThreadExecutor) else None
        )
        self.keep_finished = keep_finished
        self._plane: ControlPlane | None = None
        #: A run asks launch_gate before each attempt only with a store.
        self.gated = False
        #: Called when a run ends (a worker claims again: a slot is free).
        self.on_finished: Callable[[], None] | None = None
        #: Why a claimed run's retry goes back to the queue (a rate-limited worker's), or None.
        self.retry_requeue: Callable[[Any], str | None] | None = None
        #: True on a worker: a claimed durable task may park (a long sleep) and be let go.
        self.parking = False
        #: A durable sleep or fact wait with this long (seconds) or more to go parks.
        self.park_threshold = PARK_AFTER
        #: Called with a run's tags when it queues or leaves a slot (cluster slots rebalance).
        self.on_demand: Callable[[Collection[str]], None] | None = None
        self._observer: Observers | None = None
        #: A closing worker: its claimed runs go back to the queue (see :meth:`hands_back`).
        self.closing = False
        #: The controller, as its durable tasks reach it (ctx.child, ctx.enqueue, ctx.signal).
        self.task_plane: Any = None

    def attach(self, plane: ControlPlane) -> None:
        """Write every transition through ``plane`` from now on."""
        self._plane = plane
        self.gated = True
        plane.on_ended = self.stop_children_of
        self._compose_sink()

    @property
    def observer(self) -> Observers | None:
        """Metrics, traces (controller/observers.py): sees every run, transition and attempt."""
        return self._observer

    @observer.setter
    def observer(self, observer: Observers | None) -> None:
        self._observer = observer
        self._compose_sink()

    def _compose_sink(self) -> None:
        """The sink runs call on every transition: composed once, when plane or observer change."""
        self.sink = None if self._plane is None and self._observer is None else self._record

    # -- runs ------------------------------------------------------------------------

    def admit(self, run: TaskRun) -> None:
        """Take a new run and submit it (no store: nothing can refuse it after this)."""
        task_id = run.task_id  # register(), inline: the hot path of every submit
        if task_id in self._runs:
            raise DuplicateTask(task_id)
        self._runs[task_id] = run
        self.per_status[run.status] += 1
        if self._observer is not None:
            self._observer.registered(run)
        run.submit()

    def register(self, run: TaskRun) -> None:
        task_id = run.task_id
        if task_id in self._runs:
            raise DuplicateTask(task_id)
        self._runs[task_id] = run
        self.per_status[run.status] += 1  # pending, or queued / starting for a claimed task
        if self._observer is not None:
            self._observer.registered(run)

    def forget(self, run: TaskRun) -> None:
        """Undo :meth:`register` for a run the store refused: nothing is left behind."""
        if self._runs.get(run.task_id) is run:
            del self._runs[run.task_id]
            self.per_status[run.status] -= 1
        self._queue.discard(run)
        run.discard()

    def __contains__(self, task_id: str) -> bool:
        return task_id in self._runs

    def get(self, task_id: str) -> TaskRun | None:
        return self._runs.get(task_id)

    def runs(self) -> Iterator[TaskRun]:
        """The runs held now, in submission order (a snapshot of the list)."""
        return iter(list(self._runs.values()))

    def __len__(self) -> int:
        return len(self._runs)

    def counts(self) -> dict[TaskStatus, int]:
        return dict(self.per_status)

    def admission(self) -> AdmissionStatistics:
        return self._queue.statistics()

    def demand(self, tag: str) -> tuple[int, int]:
        """Runs holding a slot and runs waiting, among those carrying ``tag``."""
        return self._queue.demand(tag)

    def set_leased(self, tag: str, slots: int) -> None:
        """The cluster slots of ``tag`` this node holds now; runs they unblock start."""
        self._queue.set_leased(tag, slots)
        self._dispatch_ready()

    # -- RunHost: what the runs call back ------------------------------------------------

    def enqueue(self, run: HostedRun) -> None:
        if self.on_demand is not None and run.tags:
            self.on_demand(run.tags)
        queue = self._queue
        if queue.admit(run, priority=run.priority, bucket=run.bucket, tags=run.tags):
            # It took a free slot at once (nothing was waiting ahead of it).
            if not run.dispatch():
                queue.release(run)
                self._dispatch_ready()
            return
        self._dispatch_ready()

    def withdraw(self, run: HostedRun) -> None:
        self._queue.discard(run)
        if self.on_demand is not None and run.tags:
            self.on_demand(run.tags)

    def release(self, run: HostedRun) -> None:
        queue = self._queue
        queue.release(run)
        if queue.waiting:  # nothing waits: nothing to dispatch (the common case)
            self._dispatch_ready()
        if self.on_demand is not None and run.tags:
            self.on_demand(run.tags)

    def park(self, run: HostedRun) -> None:
        plane = self._plane
        assert plane is not None, "only a worker's claimed runs park"
        self._tasks.spawn(self._let_go(run, plane, run.status_version))

    async def _let_go(self, run: HostedRun, plane: ControlPlane, version: int) -> None:
        """Once the parked task is durable in the queue, forget it here (no memory, no count).

        A fact that came while the task was being parked needs no call from
        here: the park's own write wakes the task (``TaskStore.wake_for_fact``),
        so a node killed right after it leaves nothing asleep.
        """
        if await plane.writer.durable(run, version) and run.status is TaskStatus.QUEUED:
            task_run = self._runs.get(run.task_id)
            if task_run is not None:
                self.forget(task_run)
                plane.writer.forget(task_run)
        if self.on_finished is not None:
            self.on_finished()  # a worker: claim again, a slot is free

    async def _stop_children(self, run: HostedRun, plane: ControlPlane, version: int) -> None:
        """A durable task that ended without succeeding stops its unfinished children.

        Once its end is durable (a parent whose end was not written may be
        resumed and gather them): nobody is left to wait for them, and a
        child that runs on is work nobody asked for (docs/children.md).
        """
        if await plane.writer.durable(run, version):
            await self.stop_children_of(run.task_id, run.status)

    async def stop_children_of(self, task_id: str, status: TaskStatus) -> None:
        """Stop the unfinished children of ``task_id``, which ended ``status`` (not succeeded).

        Also called by a reconcile that ended a task held by a dead worker.
        """
        plane, controller = self._plane, self.task_plane
        if plane is None or controller is None or status is TaskStatus.SUCCEEDED:
            return
        reason = f"its parent {task_id!r} ended {status.value}"
        try:
            from chongming.plane.children import stop_children

            await stop_children(plane.store, controller.stop, task_id, reason, "system")
        except (StoreError, ControllerClosed) as error:  # the children run on: say so
            _log.warning("stopping the children of %r: %s", task_id, error)

    def hands_back(self, run: HostedRun) -> bool:
        """A closing worker hands back what it claimed (a run submitted here is its caller's)."""
        claimed = getattr(run, "adopted", None) is not None
        return self.closing and self._plane is not None and claimed

    def requeues_retry(self, run: HostedRun) -> str | None:
        requeue = self.retry_requeue
        if requeue is None or self._plane is None or getattr(run, "adopted", None) is None:
            return None
        return requeue(run)

    def spawn(self, run: HostedRun, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        if self._observer is not None:
            coro = self._observer.wrap_attempt(run, coro)
        return self._tasks.spawn(coro, context=run.caller_context.copy())

    def _record(self, run: HostedRun, previous: TaskStatus) -> None:
        """The sink: persist, retire an ended run, publish (the run moved the counts)."""
        plane = self._plane
        if plane is not None:
            plane.writer.record(run)  # the write-through's own call: one less per transition
        if run.status in _TERMINAL:
            self.retire(run)
            if (
                run.status is not TaskStatus.SUCCEEDED
                and plane is not None
                and self.task_plane is not None
                and getattr(getattr(run, "spec", None), "durable", False)
            ):
                self._tasks.spawn(self._stop_children(run, plane, run.status_version))
        observer = self._observer
        if observer is not None:
            observer.transition(run, previous)

    def launch_gate(self, run: HostedRun) -> Callable[[], Awaitable[bool]] | None:
        plane = self._plane
        if plane is None:
            return None
        writer, version = plane.writer, run.status_version
        spec = getattr(run, "spec", None)
        if spec is not None and spec.durable:
            # Imported here: a controller that runs no durable task never loads the journal.
            from chongming.plane.journal_gate import JournalGate

            observer = self._observer
            return JournalGate(
                plane.store,
                run.task_id,
                plane.owner,
                max_resumes=spec.max_resumes,
                durable=lambda: writer.durable(run, version),
                parkable=self.parking and getattr(run, "adopted", None) is not None,
                park_threshold=self.park_threshold,
                run_sync=self._run_sync_step,
                plane=self.task_plane,
                observe=(
                    functools.partial(observer.wrap_step, run)
                    if observer is not None and observer.wraps_steps
                    else None
                ),
            )
        return lambda: writer.durable(run, version)

    def settled(self, run: HostedRun) -> Awaitable[bool] | None:
        plane = self._plane
        return None if plane is None else plane.writer.settled(run)

    def executor_for(self, choice: object, spec: TaskSpec) -> Executor | None:
        if choice is None:
            choice = self._default_executor
        return resolve_executor(choice, spec, self._thread_executor)

    def _thread_executor(self) -> ThreadExecutor:
        if self._threads is None:
            self._threads = ThreadExecutor(max_workers=self._max_parallel)
            self._owned_executors.append(self._threads)
        return self._threads

    async def _run_sync_step(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A durable task's plain step (or operation, or check): on this host's threads."""
        return await self._thread_executor().call(fn, args, kwargs)

    def _dispatch_ready(self) -> None:
        queue = self._queue
        while True:
            run = queue.pop_ready()
            if run is None:
                return
            if not run.dispatch():
                queue.release(run)

    def retire(self, run: HostedRun) -> None:
        """``run`` ended: tell the worker, and forget the oldest beyond ``keep_finished``."""
        if self.on_finished is not None:
            self.on_finished()
        finished = self._finished
        finished.append(run.task_id)
        while len(finished) > self.keep_finished:
            task_id = finished.popleft()
            old = self._runs.get(task_id)
            # Not a run that took the id since (a worker forgets an ended run it claims again).
            if old is not None and old.status in _TERMINAL:
                del self._runs[task_id]
                self.per_status[old.status] -= 1

    # -- close -----------------------------------------------------------------------

    async def aclose(self, cancel_window: float) -> None:
        """Cancel and await the attempt tasks, then close the executors it created."""
        await self._tasks.cancel_and_wait(cancel_window)
        for executor in self._owned_executors:
            await executor.aclose()
