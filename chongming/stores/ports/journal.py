"""Journal details: step and fact times and the effects ledger of one task (optional).

The records are :mod:`chongming.stores.journal`'s; the dashboard's timeline
reads them. A store without it inherits a default that raises
``NotImplementedError``; the timeline then shows steps without times and no
effects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from chongming.stores.journal import JournalDetails

__all__ = ["JournalStore"]


class JournalStore(Protocol):
    async def journal_details(self, task_id: str) -> JournalDetails:
        """When each step was recorded and each fact sent; every effect, by intent time.

        Three reads by the task's id (each table's primary key); nothing of a
        task that has none. A time the store does not keep is left out.
        """
        raise NotImplementedError(f"{type(self).__name__} has no journal details")
