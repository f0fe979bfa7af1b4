"""The in-memory store: the reference the store contract is written against.

Every method is ``async`` to honour the port, but none does I/O or awaits:
each call is atomic with respect to the event loop, which is what makes this
store the oracle for the SQL backends. It keeps what an SQL store would give
back: datetimes in UTC, and payloads (args, kwargs, result) in their JSON
form (:func:`~chongming.state.payload.json_form`: a tuple becomes a list, an
int key a string), so every store answers the same for the same input. Naive
datetimes are refused, as by every store.

The store clock (command leases and node leases) is injectable so tests can
move time: ``InMemoryTaskStore(clock=fake.now)``.
"""

from __future__ import annotations

from chongming.stores.base import TaskStore
from chongming.stores.memory.activity import ActivityOnMemory
from chongming.stores.memory.commands import CommandsOnMemory
from chongming.stores.memory.core import CoreOnMemory
from chongming.stores.memory.durable import DurableOnMemory
from chongming.stores.memory.journal import JournalOnMemory
from chongming.stores.memory.limits import ClusterLimitsOnMemory
from chongming.stores.memory.queue import QueueOnMemory
from chongming.stores.memory.rates import RateLimitsOnMemory
from chongming.stores.memory.retention import RetentionOnMemory
from chongming.stores.memory.schedules import SchedulesOnMemory
from chongming.stores.memory.search import SearchOnMemory
from chongming.stores.memory.spawn import SpawnOnMemory

__all__ = ["InMemoryTaskStore"]


class InMemoryTaskStore(
    SpawnOnMemory,
    CoreOnMemory,
    CommandsOnMemory,
    QueueOnMemory,
    ClusterLimitsOnMemory,
    RateLimitsOnMemory,
    DurableOnMemory,
    RetentionOnMemory,
    SchedulesOnMemory,
    ActivityOnMemory,
    SearchOnMemory,
    JournalOnMemory,
    TaskStore,
):
    """A dict-backed :class:`TaskStore` for tests, demos and single-process use.

    ``clock`` returns the store's "now" (aware, UTC) for leases; it defaults to
    the wall clock.

        One module per capability of the port (``memory/core.py``, ``commands.py``,
        ``queue.py``, ``limits.py``, ``durable.py``) over the shared state of
        ``memory/state.py``.
    """

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._tasks)} tasks"
        return f"<InMemoryTaskStore {state}>"
