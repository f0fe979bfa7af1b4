"""The store port by capability: one protocol per capability, one module each.

- :class:`~chongming.stores.ports.core.CoreStore`: snapshots, history, the
  hot path, the write-through batch, counts (every store);
- :class:`~chongming.stores.ports.commands.CommandStore`: commands and node
  leases (every store);
- :class:`~chongming.stores.ports.queue.QueueStore`: the work queue;
- :class:`~chongming.stores.ports.carriers.CarrierStore`: trace carriers
  kept with queued tasks;
- :class:`~chongming.stores.ports.limits.ClusterLimitStore`: cluster-wide
  limits;
- :class:`~chongming.stores.ports.rates.RateLimitStore`: cluster-wide
  rate limits (starts per period);
- :class:`~chongming.stores.ports.durable.DurableStore`: durable execution;
- :class:`~chongming.stores.ports.retention.RetentionStore`: pruning
  terminal tasks;
- :class:`~chongming.stores.ports.schedules.ScheduleStore`: schedules;
- :class:`~chongming.stores.ports.activity.ActivityStore`: recent ends and
  the queue's oldest task, for the dashboard's charts;
- :class:`~chongming.stores.ports.search.SearchStore`: tasks by label part,
  idempotency key and creation time range;
- :class:`~chongming.stores.ports.journal.JournalStore`: a durable task's
  step and fact times and effects ledger, for the dashboard's timeline.

:class:`~chongming.stores.base.TaskStore` is all of them: the core and the
commands are abstract; the optional ones come with defaults that say the
capability is missing. Each built-in backend implements each capability in
a module of the same name (``<backend>/core.py``, ``commands.py``,
``queue.py``, ``limits.py``, ``durable.py``), composed in its ``store.py``.
Code that needs one capability may take that protocol only.
"""

from chongming.stores.ports.activity import ActivityStore as ActivityStore
from chongming.stores.ports.carriers import CarrierStore as CarrierStore
from chongming.stores.ports.commands import CommandStore as CommandStore
from chongming.stores.ports.core import CoreStore as CoreStore
from chongming.stores.ports.durable import DurableStore as DurableStore
from chongming.stores.ports.journal import JournalStore as JournalStore
from chongming.stores.ports.limits import ClusterLimitStore as ClusterLimitStore
from chongming.stores.ports.queue import QueueStore as QueueStore
from chongming.stores.ports.rates import RateLimitStore as RateLimitStore
from chongming.stores.ports.retention import RetentionStore as RetentionStore
from chongming.stores.ports.schedules import ScheduleStore as ScheduleStore
from chongming.stores.ports.search import SearchStore as SearchStore

__all__ = [
    "ActivityStore",
    "CarrierStore",
    "ClusterLimitStore",
    "CommandStore",
    "CoreStore",
    "DurableStore",
    "JournalStore",
    "QueueStore",
    "RateLimitStore",
    "RetentionStore",
    "ScheduleStore",
    "SearchStore",
]
