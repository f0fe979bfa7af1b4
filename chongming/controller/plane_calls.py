"""What a controller asks of the shared plane beyond its own tasks: reconcile, nodes, facts.

A mixin of :class:`~chongming.controller.Controller` (one idea per module:
the calls that need a store and read or judge what every node wrote).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chongming.clock import Clock, to_datetime
from chongming.controller.schedules import ScheduleCalls
from chongming.errors import ConfigurationError
from chongming.plane.buckets import BucketReport, report_buckets, unclaimed
from chongming.plane.reconcile import ReconcileReport
from chongming.scheduler.buckets import BucketPolicy
from chongming.state.payload import check_reason
from chongming.stores.durable import Fact
from chongming.stores.nodes import NodeRecord

if TYPE_CHECKING:
    from chongming.plane.plane import ControlPlane

__all__ = ["PlaneCalls"]


class PlaneCalls(ScheduleCalls):
    """Calls that need a store; see the module docstring."""

    _plane: ControlPlane | None
    owner: str
    clock: Clock
    buckets: BucketPolicy

    def _check_not_closed(self) -> None:
        raise NotImplementedError  # the controller's

    async def _open(self) -> None:
        raise NotImplementedError  # the controller's

    async def signal(
        self, task_id: str, name: str, payload: Any = None, *, key: str | None = None
    ) -> bool:
        """Send the fact ``name`` to a task: persisted first, seen by every reader.

        Set once: True when this call set it, False when it already had the
        same value; another value raises :class:`~chongming.errors.FactConflict`;
        an unknown task raises :class:`~chongming.errors.TaskNotFound`.
        ``key`` says who sent it (kept with the fact). A task waiting in
        ``ctx.wait_for_fact`` sees it at its next look (see docs/durable.md).
        """
        self._check_not_closed()
        plane = self._require_plane("signal")
        await self._open()
        fact = Fact(task_id=task_id, name=name, payload=payload, key=key)
        return await plane.store.put_fact(fact)

    async def facts(self, task_id: str) -> list[Fact]:
        """The facts a task has been sent, by name."""
        self._check_not_closed()
        plane = self._require_plane("facts")
        await self._open()
        return await plane.store.facts(task_id)

    async def reconcile(
        self, *, dry_run: bool = False, reason: str | None = None
    ) -> ReconcileReport:
        """Judge unfinished tasks of the owned buckets by their owners' node leases.

        A live owner's task is left alone; a dead owner's task that held a
        carrier becomes ``lost`` (trigger ``reconcile:lease_expired``); one
        that never started is reported adoptable and left as it is; a task
        its owner moved meanwhile is let go. ``dry_run`` writes nothing.
        Needs a store (:class:`ConfigurationError` without one).
        """
        self._check_not_closed()
        reason = check_reason(reason)
        plane = self._require_plane("reconcile")
        await self._open()
        return await plane.reconcile(
            dry_run=dry_run,
            reason=reason,
            actor=f"reconcile:{self.owner}",
            at=to_datetime(self.clock.time()),
        )

    async def nodes(self) -> list[NodeRecord]:
        """Every node the store knows, live or expired (``live`` by the store's clock)."""
        self._check_not_closed()
        plane = self._require_plane("nodes")
        await self._open()
        return await plane.store.nodes()

    async def bucket_report(self) -> BucketReport:
        """Owners and task counts per bucket, flagging buckets owned twice or orphaned."""
        self._check_not_closed()
        plane = self._require_plane("the bucket report")
        await self._open()
        nodes, counts = await plane.store.nodes(), await plane.store.task_counts()
        waiting = await unclaimed(plane.store, counts)
        return report_buckets(nodes, counts, num_buckets=self.buckets.num_buckets, waiting=waiting)

    def _require_plane(self, what: str) -> ControlPlane:
        if self._plane is None:
            raise ConfigurationError(f"{what} needs a store: Controller(store=...)")
        return self._plane
