"""The in-memory store's search: :meth:`TaskSearch.matches` over the dict, the oracle."""

from __future__ import annotations

from chongming.errors import ConfigurationError
from chongming.state.records import TaskSnapshot
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.search import SearchStore
from chongming.stores.search import TaskSearch

__all__ = ["SearchOnMemory"]


class SearchOnMemory(MemoryState, SearchStore):
    async def search_tasks(self, search: TaskSearch) -> list[TaskSnapshot]:
        self._check_open()
        if not isinstance(search, TaskSearch):
            raise ConfigurationError("search_tasks takes a TaskSearch")
        found = sorted(
            (s for s in self._tasks.values() if search.matches(s)),
            key=lambda s: (s.created_at, s.task_id),
        )
        limit = search.query.limit
        return found if limit is None else found[:limit]
