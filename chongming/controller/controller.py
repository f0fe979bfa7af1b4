"""``Controller``: registered task names in, supervised runs out.

It never creates or owns an event loop: enter it on whatever loop the host
runs (FastAPI lifespan, aiohttp ``cleanup_ctx``, a worker's ``main()``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import anyio

from chongming.clock import SYSTEM_CLOCK, Clock
from chongming.controller.host import ControllerHost
from chongming.controller.statistics import ControllerStats
from chongming.errors import (
    BucketNotOwned,
    ConfigurationError,
    ControllerClosed,
    DuplicateTask,
    TaskNotFound,
)
from chongming.executors.base import Executor
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.outcome import Outcome
from chongming.run.task_run import TaskRun, check_tags
from chongming.scheduler.buckets import BucketPolicy, format_bucket_ranges
from chongming.scheduler.limits import AdmissionLimits
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit, check_task_id
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import ExecutorChoice, TaskSpec

__all__ = ["Controller"]

_log = logging.getLogger("chongming.controller")
_SUBMITS_PER_YIELD = 16
_S = TaskStatus


class _Phase:
    NEW = "new"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Controller:
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
    ) -> None:
        self.limits = AdmissionLimits(
            max_parallel=max_parallel,
            max_parallel_per_bucket=max_parallel_per_bucket,
            resource_limits=dict(resource_limits or {}),
        )
        self.buckets = BucketPolicy(num_buckets)
        self.owned_buckets = _owned(owned_buckets, num_buckets)
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
        self._host = ControllerHost(self.limits, executor=executor, keep_finished=keep_finished)
        self._phase = _Phase.NEW
        self._closed: asyncio.Future[None] | None = None
        self._submitted_since_yield = 0

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Open for submissions. Idempotent; not needed inside ``async with``."""
        if self._phase in (_Phase.CLOSING, _Phase.CLOSED):
            raise ControllerClosed("the controller is closed")
        if self._phase == _Phase.OPEN:
            return
        self._phase = _Phase.OPEN

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

    async def close(self, grace: float | None = None) -> None:
        """Shut down: stop admitting, let running tasks finish for ``grace`` seconds,
        then stop the rest (cooperatively, then as each carrier allows).

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
        shutdown = loop.create_task(self._shutdown(grace or 0.0), name="chongming:shutdown")
        try:
            await _await_to_the_end(shutdown)
        finally:
            self._phase = _Phase.CLOSED
            if not self._closed.done():
                self._closed.set_result(None)

    async def _shutdown(self, grace: float) -> None:
        reason = "the controller is closing"
        for run in self._host.runs():
            if run.status in (_S.QUEUED, _S.PENDING, _S.BLOCKED, _S.RETRY_WAIT):
                run.shutdown(reason)
        running = [run for run in self._host.runs() if not run.done]
        if running and grace > 0:
            await _wait_runs(running, grace)
        for run in running:
            if not run.done:
                run.shutdown(reason)
        bound = self.windows.stop_grace + self.windows.cancel_window + 0.5
        await _wait_runs([run for run in running if not run.done], bound)
        await self._host.aclose(self.windows.cancel_window)

    def _check_not_closed(self) -> None:
        if self._phase in (_Phase.CLOSING, _Phase.CLOSED):
            raise ControllerClosed("the controller is closed; it accepts no more calls")

    def _check_open(self) -> None:
        if self._phase == _Phase.OPEN:
            return
        if self._phase == _Phase.NEW:
            # Open on first use, so `controller = Controller(); await submit()` works.
            self._phase = _Phase.OPEN
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
    ) -> TaskSpec:
        """Allow ``fn`` to be submitted as ``name``. Names, never code, cross boundaries."""
        self._check_not_closed()
        return self.registry.register(
            name,
            fn,
            tags=tags,
            retry=retry,
            timeout=timeout,
            executor=executor,
            priority=priority,
        )

    def register_module(self, module: ModuleType) -> list[str]:
        """Register every ``@task`` function defined in ``module``."""
        self._check_not_closed()
        return self.registry.register_module(module)

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
        self._check_open()
        spec = self.registry.get(name)
        if task_id is not None and check_task_id(task_id) in self._host:
            raise DuplicateTask(task_id)
        bucket = self._bucket_for(bucket_key)
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
        self._host.admit(run)
        self._submitted_since_yield += 1
        if self._submitted_since_yield >= _SUBMITS_PER_YIELD:
            # A tight submit loop would otherwise hold the event loop for as
            # long as the whole batch takes; yield now and then.
            self._submitted_since_yield = 0
            await asyncio.sleep(0)
        return run

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
        """The task's latest snapshot; :class:`TaskNotFound` if unknown."""
        return self.run_for(task_id).snapshot

    async def history(self, task_id: str) -> list[Transition]:
        return list(self.run_for(task_id).transitions)

    async def list_tasks(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        """Snapshots matching ``query`` in submission order (oldest first)."""
        self._check_not_closed()
        query = query or TaskQuery()
        result: list[TaskSnapshot] = []
        for run in self._host.runs():
            snapshot = run.snapshot
            if query.matches(snapshot):
                result.append(snapshot)
                if query.limit is not None and len(result) >= query.limit:
                    break
        return result

    async def stats(self) -> ControllerStats:
        self._check_not_closed()
        admission = self._host.admission()
        counts = self._host.counts()
        by_status = {status.value: count for status, count in counts.items() if count}
        active = sum(count for status, count in counts.items() if not status.is_terminal)
        return ControllerStats(
            total=len(self._host),
            active=active,
            by_status=by_status,
            queued=admission.waiting,
            holding_slot=admission.running,
            max_parallel=self.limits.max_parallel,
            per_bucket=dict(admission.running_per_bucket),
            per_resource=dict(admission.running_per_resource),
        )

    # -- control -------------------------------------------------------------------------

    async def stop(self, task_id: str, *, reason: str | None = None, actor: str = "user") -> bool:
        """Ask a task to stop; see :meth:`TaskRun.stop`. False if it already ended."""
        return await self.run_for(task_id).stop(reason=reason, actor=actor)

    async def pause(self, task_id: str, *, reason: str | None = None, actor: str = "user") -> bool:
        """Pause a task at its next checkpoint; False (rolled back) if not reached in time."""
        return await self.run_for(task_id).pause(reason=reason, actor=actor)

    async def resume(self, task_id: str, *, reason: str | None = None, actor: str = "user") -> bool:
        """Resume a paused task; False if it was not paused."""
        return await self.run_for(task_id).resume(reason=reason, actor=actor)

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
        if timeout is None:
            await _all_done(runs)
        else:
            async with asyncio.timeout(timeout):
                await _all_done(runs)
        return [run.outcome for run in runs if run.outcome is not None]

    def __repr__(self) -> str:
        return f"<Controller owner={self.owner!r} {self._phase} tasks={len(self._host)}>"


def _owned(owned: Iterable[int] | None, num_buckets: int) -> frozenset[int] | None:
    if owned is None:
        return None
    if isinstance(owned, str):
        raise ConfigurationError("owned_buckets takes bucket numbers; parse strings first")
    result = frozenset(owned)
    for bucket in result:
        if isinstance(bucket, bool) or not isinstance(bucket, int):
            raise ConfigurationError(f"owned bucket numbers are ints, got {bucket!r}")
        if not 0 <= bucket < num_buckets:
            raise ConfigurationError(f"owned bucket {bucket} is outside 0..{num_buckets - 1}")
    if not result:
        raise ConfigurationError("owned_buckets is empty: this node could run nothing")
    return result


async def _all_done(runs: list[TaskRun]) -> None:
    """Wait for every run with one future and a countdown (not one await per run)."""
    pending = [run for run in runs if not run.done]
    if not pending:
        return
    finished = asyncio.get_running_loop().create_future()
    remaining = len(pending)

    def count_down(_: TaskRun) -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0 and not finished.done():
            finished.set_result(None)

    for run in pending:
        run.add_done_callback(count_down)
    await asyncio.shield(finished)


async def _wait_runs(runs: list[TaskRun], seconds: float) -> None:
    try:
        async with asyncio.timeout(seconds):
            await _all_done(runs)
    except TimeoutError:
        return


async def _await_to_the_end(task: asyncio.Task[None]) -> None:
    """Await ``task`` even if we are cancelled meanwhile; re-raise the cancellation after."""
    cancelled = False
    # anyio re-delivers a scope's cancellation at every await; its shield stops
    # that, and the loop absorbs a plain asyncio cancel (edge-triggered).
    with anyio.CancelScope(shield=True):
        while True:
            try:
                await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                if task.done():
                    break
                cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()
