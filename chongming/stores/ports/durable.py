"""Durable execution: epochs, memoised steps, set-once facts, effects (optional).

The records are :mod:`chongming.stores.durable`'s. A store without durable
execution inherits defaults that raise ``NotImplementedError``; its clock
(``store_time``) defaults to this process's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # these import stores.checks, which needs the records above
    from chongming.state.records import TaskSnapshot, Transition
    from chongming.stores.children import SpawnedChild
    from chongming.stores.durable import Commit, DurableRun, EffectState, Fact, StepRecord

__all__ = ["DurableStore", "SpawnsInThreeCalls"]


class SpawnsInThreeCalls(NotImplementedError):
    """The default ``spawn_child``: this store has none (``ctx.spawn`` makes three calls)."""


class DurableStore(Protocol):
    """Fenced steps, facts and effects of durable tasks, judged by the store's clock."""

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

    async def record_steps(
        self, task_id: str, epoch: int, steps: Sequence[StepRecord]
    ) -> list[StepRecord]:
        """:meth:`record_step` of each of ``steps``, in order; the steps as stored.

        A wait for many facts decides many at once (``ctx.gather`` of children
        that already ended): one write instead of two per fact. A store with
        transactions makes it one (all or none, fenced once); this default
        records them one by one, which is also safe: each record is set-once,
        and a prefix of them is a journal a replay can read.
        """
        return [await self.record_step(task_id, epoch, step) for step in steps]

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
        steps hold more deadlines of ``fact:<name>`` than decisions. True when
        it woke the task.

        Every write that parks a task (``save`` or ``apply_writes`` making it
        queued, unowned, with an earliest start) applies this same wake in its
        own transaction, for any fact the task waits for: a fact sent while
        the task was still being parked wakes it even if the parking node
        dies right after (the contract's
        ``test_a_park_written_after_its_fact_came_is_claimable_at_once``).
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def link_child(self, parent_id: str, child_id: str) -> str | None:
        """Make ``parent_id`` the parent of ``child_id`` (set once; a second link is a no-op).

        Returns the child's parent after the call: ``parent_id``, or the
        task an earlier link named (``None`` only from a store that predates
        the answer; the caller then asks :meth:`parent_of`).

        From then on the child's terminal transition writes, in its own
        transaction, the parent's fact ``child:<child_id>`` valued
        ``{"status", "result", "failure"}`` and wakes the parent parked for it
        (:mod:`chongming.stores.children`). A child already ended gets its fact
        written here, in this transaction. An unknown task raises
        :class:`~chongming.errors.TaskNotFound`.
        """
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def spawn_child(
        self,
        parent_id: str,
        epoch: int,
        step: StepRecord,
        child: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> SpawnedChild:
        """Enqueue ``child``, link it to ``parent_id`` and record ``step``: one transaction.

        ``trace_carrier`` and ``facts`` as for ``enqueue`` (a twin gets none).

        One transaction instead of three (``ctx.spawn``'s cost per child):
        fenced like :meth:`record_step` first (a stale epoch raises
        :class:`~chongming.stores.durable.StaleEpoch` and writes nothing);
        ``child`` carries an idempotency key, so a twin is linked instead of
        a second task made. ``step`` is recorded with the child's id as its
        value, unless the child already had another parent (then nothing is
        linked or recorded and the answer's ``step`` is ``None``). Optional:
        without it ``ctx.spawn`` makes the three calls, each safe to repeat.
        """
        raise SpawnsInThreeCalls(f"{type(self).__name__} spawns children in three calls")

    async def parent_of(self, task_id: str) -> str | None:
        """The parent of a child task (see :meth:`link_child`), or None."""
        raise NotImplementedError(f"{type(self).__name__} has no durable execution")

    async def children_of(self, task_id: str) -> list[str]:
        """The ids of a task's children, sorted."""
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
