"""``submit``: a task run here, on this controller's admission, from its registered name.

A mixin of :class:`~chongming.controller.Controller` (one idea per module):
every check before anything is queued, then admission; with a store the
creation is durable before the run is queued (acknowledged submits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from chongming.controller.support import Phase
from chongming.errors import BucketNotOwned, DuplicateTask
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.run.task_run import TaskRun, check_tags
from chongming.scheduler.buckets import BucketPolicy, format_bucket_ranges
from chongming.state.payload import check_task_id
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import durable_needs_store

if TYPE_CHECKING:
    from chongming.controller.host import ControllerHost
    from chongming.controller.run_factory import RunFactory
    from chongming.plane.plane import ControlPlane

__all__ = ["NO_STORE", "SUBMITS_PER_YIELD", "SubmitCalls"]

#: How a controller without a store names itself in "needs a store" errors.
NO_STORE = "this controller"
#: A tight submit loop yields to the event loop once per this many submits.
SUBMITS_PER_YIELD = 16


class SubmitCalls:
    """:meth:`submit`; see the module docstring."""

    registry: TaskRegistry
    run_factory: RunFactory
    buckets: BucketPolicy
    owned_buckets: frozenset[int] | None
    _host: ControllerHost
    _plane: ControlPlane | None
    _phase: str
    _submitted_since_yield: int

    if TYPE_CHECKING:  # the controller's

        async def _open(self) -> None: ...

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
        if self._phase != Phase.OPEN:
            await self._open()
        spec = self.registry.get(name)
        if spec.durable and self._plane is None:
            raise durable_needs_store(spec.name, NO_STORE)
        if task_id is not None and check_task_id(task_id) in self._host:
            raise DuplicateTask(task_id)
        bucket = None if bucket_key is None else self._bucket_for(bucket_key)
        if tags is not None:
            tags = spec.tags | check_tags(tags)
        run = self.run_factory.new(
            spec,
            args,
            kwargs,
            task_id=task_id,
            name=name,
            label=label,
            retry=retry,
            timeout=timeout,
            tags=tags,
            priority=priority,
            bucket=bucket,
            bucket_key=bucket_key,
        )
        plane = self._plane
        if plane is None:
            self._host.admit(run)
        else:
            await self._admit_durably(run, plane)
        self._submitted_since_yield += 1
        if self._submitted_since_yield >= SUBMITS_PER_YIELD:
            # A tight submit loop would otherwise hold the event loop for as
            # long as the whole batch takes; yield now and then.
            self._submitted_since_yield = 0
            await asyncio.sleep(0)
        return run

    async def _admit_durably(self, run: TaskRun, plane: ControlPlane) -> None:
        """Queue ``run`` only once the store holds it; if it cannot, leave nothing behind.

        Cancellation: the creation is awaited to its end first (it may have
        committed); a created task runs, and the cancellation is re-raised.
        """
        await plane.become_node()  # a second live node under this owner name is refused here
        host = self._host
        host.register(run)
        run.mark_queued()
        writer = plane.writer
        cancelled = False
        error: BaseException | None = None
        # anyio re-delivers a scope's cancellation at every await: shield from it
        # while the outcome settles (the store bounds how long that takes).
        import anyio  # imported on use: a controller's import stays cheap

        with anyio.CancelScope(shield=True):
            while (creation := writer.creation(run)) is not None:
                try:
                    await creation
                    break
                except asyncio.CancelledError:
                    # Our cancellation cancelled the future, not the write: ask again
                    # until the outcome is settled, then re-raise.
                    cancelled = True
                except Exception as refused:
                    error = refused
                    break
        if error is not None:
            host.forget(run)
            plane.writer.forget(run)
            raise error
        run.enter_admission()
        if cancelled:
            raise asyncio.CancelledError

    def _bucket_for(self, bucket_key: str | None) -> int | None:
        if bucket_key is None:
            return None
        bucket = self.buckets.bucket_for(bucket_key)
        if self.owned_buckets is not None and bucket not in self.owned_buckets:
            raise BucketNotOwned(bucket, format_bucket_ranges(self.owned_buckets))
        return bucket
