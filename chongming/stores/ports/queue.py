"""The work queue: tasks any node may claim (optional).

A store without it inherits defaults that raise ``NotImplementedError``
(``wait_queue_hint`` never returns).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from chongming.state.records import TaskSnapshot, Transition

if TYPE_CHECKING:  # these import stores.checks, which needs the records above
    from chongming.stores.durable import Fact
    from chongming.stores.queue import ClaimedTask, Enqueued, Serves

__all__ = ["QueueStore"]


class QueueStore(Protocol):
    """Enqueue once per idempotency key; claim atomically; give a claim back."""

    # -- the work queue (work for any node) -------------------------------------

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> Enqueued:
        """Insert a task any node may claim; once per idempotency key.

        Like :meth:`create`, plus: when ``snapshot.idempotency_key`` is set and
        already names a task, nothing is written and that task is returned
        (``created=False``) if it was enqueued with the same input (name,
        version, arguments: :func:`~chongming.stores.queue.input_digest`);
        with different input :class:`IdempotencyConflict` is raised. A key
        lives as long as its task. Optional: a store without the work queue
        raises ``NotImplementedError``.

        ``connection``: the caller's own connection, inside its open
        transaction, on the database that holds the store. The task is then
        written in that transaction (under a savepoint: a refusal leaves the
        transaction usable) and exists if and only if the caller commits. A
        store that cannot join the caller's transaction raises
        :class:`ConfigurationError`.

        ``trace_carrier``: the enqueuer's trace context (see
        :func:`~chongming.stores.queue.check_trace_carrier`), written with the
        task in the same write and read back by a worker that traces, after its
        claim (:meth:`trace_carriers`); a bad one is refused with
        :class:`PayloadError`. A task that was not created (an idempotency
        key's twin) keeps what it was enqueued with.

        ``facts``: facts for the new task (``Fact.task_id`` its id, each name
        once), written in the same transaction: the task exists with all of
        them or not at all (a durable task that waits for one never starts
        without it). A twin of an idempotency key gets none of them. Not with
        ``connection`` (:class:`ConfigurationError`). A store whose ``enqueue``
        has no ``facts`` parameter gets them from the controller by
        ``put_fact`` after the enqueue, which is not atomic.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (enqueue)")

    async def enqueue_many(
        self,
        items: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
    ) -> list[Enqueued | Exception]:
        """:meth:`enqueue` for each ``(snapshot, transitions)``, each on its own.

        The answers come in order: what ``enqueue`` returned, or the error it
        raised for that item (the others are enqueued all the same). This
        default calls ``enqueue`` per item; a store may write them together.
        """
        results: list[Enqueued | Exception] = []
        for snapshot, transitions in items:
            try:
                if trace_carrier is None:  # a store whose enqueue predates the carrier
                    enqueued = await self.enqueue(snapshot, transitions, connection=connection)
                else:
                    enqueued = await self.enqueue(
                        snapshot, transitions, connection=connection, trace_carrier=trace_carrier
                    )
                results.append(enqueued)
            except Exception as error:
                results.append(error)
        return results

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
    ) -> list[TaskSnapshot]:
        """Take up to ``limit`` queued tasks nobody holds, writing ``owner`` as their owner.

        Claimable: status ``queued``, no owner, ``not_before`` unset or past by
        the store's clock, bucket in ``buckets`` (``None``: any; a task without
        a bucket is claimable by every node), ``serves[name]`` holding the
        task's version (an unversioned task matches any served version), and
        none of ``exclude_tags`` among its tags (a worker leaves alone what it
        could not start now, e.g. a tag whose cluster-wide slots are all held),
        and, when ``tags`` is given, at least one of ``tags`` among its tags (a
        worker pool: ``chongming worker --tags payments``). Order: higher
        ``priority`` first, then earlier ``queued_at``, then ``task_id``; with
        ``age_step`` (seconds) by the *effective* priority ``priority +
        floor(waited / age_step)`` instead (``waited``: since ``queued_at``, by
        the store's clock), so a task gains one priority level per step it
        waits and a flood of higher work cannot starve it forever. Aging ranks
        the 32 highest priority levels present (their oldest tasks); lower
        levels wait as without it. Atomic: two claimers never take the same task. The status and its
        version do not change (the claimer starts the task through the state
        machine); the snapshots returned carry the new owner.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (claim)")

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
        at: datetime,
    ) -> list[ClaimedTask]:
        """:meth:`claim`, and every task taken moves ``queued -> starting`` in the same step.

        For a claimer that launches at once whatever it takes (it has the free
        slots): the start is durable when this returns, with no write of its
        own, and the claimer learns each task's whole history in the same
        call. The transition is what a dispatch writes (trigger
        ``scheduler:dispatch``, actor ``system``, at ``at``, the next attempt;
        ``updated_at`` is ``at``). Same filters and order as :meth:`claim`;
        atomic like it. A claimer that dies before launching leaves
        ``starting`` tasks, which reconcile calls lost (never run twice),
        where a plain claim would have been requeued.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (claim_started)")

    async def start_claimed(
        self, owner: str, claimed: Sequence[TaskSnapshot], *, at: datetime
    ) -> list[ClaimedTask]:
        """Move tasks a plain :meth:`claim` gave ``owner`` ``queued -> starting``, in one step.

        For a claimer that decides between claim and start which of them may
        start (a rate-limited worker asks for start grants there): the rest of
        what :meth:`claim_started` does, with the same transition and the same
        answer (each task with its whole history), without a read of the
        histories and a write per task. A task is started only while it is
        still ``queued`` at the version it was claimed at and held by
        ``owner``; one that changed meanwhile (stopped, say) is left as it is
        and not returned. A claimer that dies after it leaves ``starting``
        tasks, which reconcile calls lost.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (start_claimed)")

    async def wait_queue_hint(self) -> None:
        """Return when a task may have been enqueued. Only a hint: claim afterwards.

        The first call (and any call after the listening session was lost)
        may return at once. The default never returns; callers wrap it in
        their poll interval.
        """
        import anyio

        await anyio.sleep_forever()

    async def wait_end_hint(self) -> None:
        """Return when a task may have ended. Only a hint: read the task afterwards.

        PostgreSQL: a NOTIFY sent by every terminal transition's commit, on
        any node. The first call (and any after the listening session was
        lost) may return at once. The default never returns; callers wrap it
        in their poll interval.
        """
        import anyio

        await anyio.sleep_forever()

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        """Give a claimed task back to the queue: its owner is cleared.

        Only if it is still ``queued`` at ``expect_version`` and held by
        ``owner`` (it never started here); ``False`` (nothing written)
        otherwise. A worker shutting down returns what it claimed but did not
        start, so a rolling restart loses nothing.
        """
        raise NotImplementedError(f"{type(self).__name__} has no work queue (release_claim)")
