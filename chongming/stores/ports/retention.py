"""Retention: delete terminal tasks with everything that hangs off them (optional).

The records and rules are :mod:`chongming.stores.retention`'s; a store
without retention inherits defaults that raise ``NotImplementedError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # these import stores.checks, which needs the records above
    from chongming.stores.retention import PruneSelection

__all__ = ["RetentionStore"]


class RetentionStore(Protocol):
    """Prune terminal tasks in bounded batches; count what a prune would take."""

    async def prune_tasks(self, selection: PruneSelection, *, limit: int) -> int:
        """Delete up to ``limit`` tasks of ``selection``, oldest finished first; how many.

        Each task goes with its history, commands, idempotency key, durable
        run, steps, facts, effects and trace carrier, in one short
        transaction; a task that is not terminal in the store is never
        deleted, whatever ``selection`` says. Rows another transaction holds
        are skipped, not waited for (the next batch finds them), so a prune
        never holds up a claim. Run it again until it returns less than
        ``limit``. Idempotent: two prunes at once delete each task once.

        Cancellation: the batch's outcome is unknown (it may have committed);
        running it again is safe.
        """
        raise NotImplementedError(f"{type(self).__name__} has no retention (prune_tasks)")

    async def count_prunable(self, selection: PruneSelection) -> int:
        """How many tasks :meth:`prune_tasks` would delete for ``selection`` now (a dry run)."""
        raise NotImplementedError(f"{type(self).__name__} has no retention (count_prunable)")
