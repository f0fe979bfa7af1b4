"""What a controller answers about tasks and asks of them: read, list, count, stop, wait.

A mixin of :class:`~chongming.controller.Controller` (one idea per module:
the calls on tasks that exist, held here or, with a store, anywhere).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from chongming.clock import Clock, to_datetime
from chongming.controller.statistics import ControllerStats, count_tasks, local_totals
from chongming.controller.support import all_done
from chongming.errors import ConfigurationError, TaskNotFound
from chongming.plane.failures import PersistFailures
from chongming.run.outcome import Outcome
from chongming.run.task_run import TaskRun
from chongming.scheduler.limits import AdmissionLimits
from chongming.state.payload import check_reason, check_task_id
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.nodes import CommandKind

if TYPE_CHECKING:
    from chongming.controller.host import ControllerHost
    from chongming.controller.observers import Observers
    from chongming.plane.cluster_slots import ClusterSlots
    from chongming.plane.plane import ControlPlane
    from chongming.stores.base import TaskStore
    from chongming.stores.nodes import Command

__all__ = ["TaskCalls"]


class TaskCalls:
    """Calls on tasks; see the module docstring."""

    _host: ControllerHost
    _plane: ControlPlane | None
    _observers: Observers | None
    _cluster: ClusterSlots | None
    owner: str
    clock: Clock
    limits: AdmissionLimits

    def _check_not_closed(self) -> None:
        raise NotImplementedError  # the controller's

    async def _open(self) -> None:
        raise NotImplementedError  # the controller's

    @property
    def store(self) -> TaskStore | None:
        """The store this controller writes through to (``None``: in memory only)."""
        return None if self._plane is None else self._plane.store

    @property
    def persist_failures(self) -> PersistFailures:
        """What the store could not take yet (always empty without a store)."""
        return PersistFailures() if self._plane is None else self._plane.failures()

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

        Its unfinished child tasks (``ctx.child`` / ``ctx.spawn``) are asked
        to stop too, with the same reason, and theirs in turn.

        A task held by another process gets a stop command addressed to its
        owner; True then means the request was issued.
        """
        self._check_not_closed()
        run = self._host.get(task_id)
        if run is not None:
            stopped = await run.stop(reason=reason, actor=actor)
        else:
            stopped = await self._command(CommandKind.STOP, task_id, reason, actor)
        if self._plane is not None:
            from chongming.plane.children import stop_children

            # Its unfinished child tasks stop too, with its reason (docs/children.md).
            await stop_children(self._plane.store, self.stop, task_id, reason, actor)
        return stopped

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
        from chongming.plane.apply import send_command

        return await send_command(plane.store, kind, task_id, reason=reason, actor=actor, at=at)

    async def _apply_command(self, command: Command) -> str | None:
        from chongming.plane.apply import apply_command

        plane = self._plane
        assert plane is not None
        outcome = await apply_command(
            command,
            held=self._host.get,
            store=plane.store,
            owner=self.owner,
            at=lambda: to_datetime(self.clock.time()),
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
