"""The persistence port every backend implements.

Four kinds of data are kept apart because their write rates and consistency
needs differ:

- snapshots (``create``, ``save``, ``get``, ``query``): compare-and-set on
  ``status_version``; a stale writer gets :class:`VersionConflict`;
- history (``append``, ``history``): append-only, idempotent per
  ``(task_id, version)``, always returned in version order;
- the hot path (``touch``): progress and heartbeat; never bumps the version
  and never conflicts with a state write;
- commands (``submit_command``, ``claim_commands``, ``complete_command``,
  ``release_command``, ``command_records``): cross-process control, claimed
  with a lease, completed with a recorded outcome;
- nodes (``register_node``, ``renew_node``, ``release_node``, ``nodes``): one
  lease per node, judged by the store's clock, whatever the number of tasks
  the node holds (a task names its owner; the owner's node lease says whether
  it is alive). There are no per-task leases.
- counts (``task_counts``): grouped by status, bucket and owner.

Every method may raise :class:`StoreClosed` after ``close()`` and
:class:`StoreUnavailable` / :class:`StoreBusy` / :class:`StoreFull` when the
backend fails; no driver exception ever escapes.

Cancellation: cancelling a call leaves the outcome of a write unknown (the
statement may still commit). Callers that must know re-read; stores resolve
their own internal retries the same way.

The port is cut by capability (:mod:`chongming.stores.ports`): the core
(snapshots, history, hot path, counts) and commands/nodes, which every store
has, and the optional work queue, trace carriers, cluster-wide limits and
durable execution. :class:`TaskStore` is all of them at once.
"""

from __future__ import annotations

from chongming.stores.nodes import Command, CommandKind, CommandState
from chongming.stores.ports.activity import ActivityStore
from chongming.stores.ports.carriers import CarrierStore
from chongming.stores.ports.commands import CommandStore
from chongming.stores.ports.core import CoreStore, count_key, is_stored
from chongming.stores.ports.durable import DurableStore
from chongming.stores.ports.granted import GrantedClaimStore
from chongming.stores.ports.journal import JournalStore
from chongming.stores.ports.limits import ClusterLimitStore
from chongming.stores.ports.queue import QueueStore
from chongming.stores.ports.rates import RateLimitStore
from chongming.stores.ports.retention import RetentionStore
from chongming.stores.ports.schedules import ScheduleStore
from chongming.stores.ports.search import SearchStore

__all__ = [
    "Command",
    "CommandKind",
    "CommandState",
    "TaskStore",
    "count_key",
    "is_stored",
]


class TaskStore(
    GrantedClaimStore,  # first: it builds on the queue and the rate limits below
    CoreStore,
    CommandStore,
    QueueStore,
    CarrierStore,
    ClusterLimitStore,
    RateLimitStore,
    DurableStore,
    RetentionStore,
    ScheduleStore,
    ActivityStore,
    SearchStore,
    JournalStore,
):
    """Async persistence for tasks: every capability of the port (see the module docstring).

    The core and the commands are abstract; a store without the queue,
    carriers, cluster limits or durable execution inherits those parts'
    defaults, which say so (``NotImplementedError``).
    """
