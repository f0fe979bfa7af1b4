"""Commands and nodes: cross-process control, one lease per node.

Every store has them. A command is claimed with a lease and completed with
a recorded outcome; a node registers under its owner name and renews one
lease, judged by the store's clock, whatever the number of tasks it holds
(there are no per-task leases).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Protocol

from chongming.stores.nodes import Command, CommandRecord, NodeInfo, NodeRecord

if TYPE_CHECKING:  # these import stores.checks, which needs the records above
    pass

__all__ = ["CommandStore"]


class CommandStore(Protocol):
    """Commands (claimed with a lease) and node leases (one per node)."""

    # -- commands ------------------------------------------------------------

    @abc.abstractmethod
    async def submit_command(self, command: Command) -> None:
        """Store a new, unclaimed command and wake pollers."""

    @abc.abstractmethod
    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        """Claim up to ``limit`` unfinished commands addressed to ``owner`` (or to nobody)
        whose lease is free or expired, oldest first. Two concurrent claimers never
        get the same command while its lease runs."""

    @abc.abstractmethod
    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        """Mark a command done and record ``outcome`` (what became of it) and the time.

        Returns False if ``owner`` no longer holds its lease (nothing is
        written then). ``outcome`` is checked like any stored text (no NUL,
        no lone surrogates, at most :data:`~chongming.stores.checks.MAX_OUTCOME_CHARS`
        characters): :class:`PayloadError` otherwise.
        """

    @abc.abstractmethod
    async def release_command(self, command_id: str, owner: str) -> bool:
        """Hand a claimed command back untouched (lease cleared) for its real holder."""

    async def wait_command_hint(self) -> None:
        """Return when a command may have arrived. Only a hint: poll afterwards.

        The default never returns; callers wrap it in their poll interval.
        """
        import anyio

        await anyio.sleep_forever()

    @abc.abstractmethod
    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        """Commands newest first (``created_at`` then ``command_id``, descending), of one
        task or all, at most ``limit``, each with its :class:`CommandState` (judged by
        the store's clock: a claim whose lease ran out is ``pending`` again) and its
        recorded outcome."""

    # -- nodes (one lease per node) -------------------------------------------

    @abc.abstractmethod
    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        """Register ``info.owner`` with a lease ``ttl_seconds`` from the store's now.

        Takes over the row when it is absent, expired, or of the same
        incarnation (``started_at`` is kept for the same incarnation). Raises
        :class:`NodeConflict` (naming the other's host and pid) when a live
        node of another incarnation holds the owner name; nothing is written
        then. Atomic: of two processes registering one owner at once, exactly
        one wins.
        """

    @abc.abstractmethod
    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        """Extend this node's lease to ``ttl_seconds`` from the store's now (one row,
        whatever its task count).

        False when the row is gone or belongs to another incarnation: this
        node was replaced and must stop acting as ``owner``. A node's own row
        is renewed even after its lease ran out, as long as nobody took it.
        """

    @abc.abstractmethod
    async def release_node(self, owner: str, incarnation: str) -> None:
        """On a clean close: the lease expires now, so its tasks are judged at once.

        A row of another incarnation is left alone.
        """

    @abc.abstractmethod
    async def nodes(self) -> list[NodeRecord]:
        """Every node row, live or expired, ordered by owner; ``live`` judged by the
        store's clock at read time."""
