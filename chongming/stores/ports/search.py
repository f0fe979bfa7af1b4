"""Search: list tasks by a part of their label, their idempotency key, a creation time range.

The record is :mod:`chongming.stores.search`'s. A store without it inherits
a default that raises ``NotImplementedError``; the dashboard then refuses
those fields with a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from chongming.state.records import TaskSnapshot
    from chongming.stores.search import TaskSearch

__all__ = ["SearchStore"]


class SearchStore(Protocol):
    async def search_tasks(self, search: TaskSearch) -> list[TaskSnapshot]:
        """The tasks ``search`` matches, in ``query``'s order (created, then id), up to its limit.

        An idempotency key is looked up by its index; a time range walks the
        creation index; a label part is compared on the rows the other
        filters leave (a scan when it is the only filter, bounded by the limit
        only when enough rows match).
        """
        raise NotImplementedError(f"{type(self).__name__} has no search (search_tasks)")
