"""The behaviour every :class:`~chongming.stores.base.TaskStore` must show.

Subclass :class:`StoreContract` in your test suite and implement
:meth:`StoreContract.make_store`; every ``async def test_*`` coroutine then
runs against your backend (pytest with pytest-asyncio in ``asyncio_mode =
"auto"`` collects them from a ``Test*`` subclass)::

    from chongming.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        async def make_store(self) -> TaskStore:
            return MyStore(...)          # fresh and empty for every test

Importing this module never imports pytest: the checks are plain ``assert``
statements, so any async test runner can drive them.

Hooks (a stable API):

``async def make_store(self) -> TaskStore`` (required)
    Return a new store over an **empty** database, not yet opened (the tests
    rely on the implicit open of the first operation, and some call ``open()``
    or ``async with`` themselves). A sync ``def`` returning the store also
    works.
``async def release_store(self, store) -> None``
    Called after each test, even a failed one. The default closes the store;
    override it to also drop a per-test schema or assert that no connection
    leaked (call ``super().release_store(store)`` first).
``async def advance_clock(self, seconds) -> None``
    Move the store's clock forward. Lease tests call it, then poll the store
    with a bounded deadline until the lease has expired. The default does
    nothing: a store whose clock is real (SQLite's wall clock, PostgreSQL's
    ``now()``) simply lets real time pass. Such backends keep the default and,
    if their clock is coarse or remote, raise :attr:`lease_seconds` (short
    TTLs keep the suite fast) and :attr:`wait_timeout` (the polling bound).

Class attributes: :attr:`lease_seconds` (the short TTL used where a lease
must run out, 0.2 s), :attr:`long_lease_seconds` (a TTL that never runs out
during a test, 60 s), :attr:`wait_timeout` and :attr:`poll_interval`.

Boundary limits are part of the contract: NUL and lone surrogates in any text,
JSON payloads over :attr:`max_payload_bytes`, integers outside signed 64 bits
and naive datetimes are refused with :class:`~chongming.errors.PayloadError`
and nothing is written (use :mod:`chongming.stores.checks` and
:mod:`chongming.state.payload` in your backend). Payloads come back in their
JSON form (:func:`chongming.state.payload.json_form`): tuples as lists,
non-string keys as strings.

Optional parts: a store with cluster-wide limits (``lease_cluster_slots``)
also mixes in :class:`ClusterLimitContract`
(``class TestMyStore(StoreContract, ClusterLimitContract)``); one with
durable execution (``record_step``) mixes in :class:`DurableContract`; one
that keeps trace carriers (``enqueue(trace_carrier=)``, ``trace_carriers``)
mixes in :class:`TraceCarrierContract`; one with rate limits
(``take_rate_grants``) mixes in :class:`RateLimitContract`; one whose claims
take a pool's ``tags=`` mixes in :class:`PoolClaimContract`; one with
``start_claimed`` mixes in :class:`StartClaimedContract` (with rate limits
too: :class:`GrantedClaimContract`, which includes it); one that prunes
(``prune_tasks``) mixes in :class:`RetentionContract`; one with schedules
(``fire_schedule``) mixes in :class:`ScheduleContract`; one with child
tasks (``link_child``) mixes in :class:`ChildContract` (and one that
spawns a child in one transaction, ``spawn_child``, :class:`SpawnContract`); one with the
dashboard's activity reads (``end_counts``, ``recent_durations``,
``oldest_queued``) mixes in :class:`ActivityContract`; one with
``search_tasks`` mixes in :class:`SearchContract`; one with
``journal_details`` mixes in :class:`JournalContract`; one whose
``enqueue`` takes ``facts=`` mixes in :class:`EnqueueFactsContract`.

What is *not* specified (and not tested): ``append`` of transitions for a
task that was never created; whether ``complete_command`` succeeds for a
holder whose lease expired but was not claimed by anyone else; whether a
``PayloadError`` in ``apply_writes`` leaves the writes before it unwritten
(the built-in backends check the whole batch first; the default of the port
applies writes one by one).

Both write paths are part of the contract (:class:`TrustedWriteContract`): a
write marked ``trusted`` (the write-through's own records) stores exactly
what the checked path stores, and every public entry point still refuses a
bad record with ``PayloadError``, nothing written.
"""

from __future__ import annotations

from chongming.testing.store_contract._support import HOSTILE_STRINGS as HOSTILE_STRINGS
from chongming.testing.store_contract._support import make_snapshot as make_snapshot
from chongming.testing.store_contract._support import next_step as next_step
from chongming.testing.store_contract.activity import ActivityContract
from chongming.testing.store_contract.answers import AnswerContract
from chongming.testing.store_contract.carriers import TraceCarrierContract
from chongming.testing.store_contract.children import ChildContract
from chongming.testing.store_contract.commands import CommandContract
from chongming.testing.store_contract.durable import DurableContract
from chongming.testing.store_contract.enqueue_facts import EnqueueFactsContract
from chongming.testing.store_contract.granted_starts import (
    GrantedClaimContract,
    StartClaimedContract,
)
from chongming.testing.store_contract.history import HistoryContract
from chongming.testing.store_contract.journal import JournalContract
from chongming.testing.store_contract.limits import ClusterLimitContract
from chongming.testing.store_contract.nodes import NodeContract
from chongming.testing.store_contract.payloads import PayloadContract
from chongming.testing.store_contract.pools import PoolClaimContract
from chongming.testing.store_contract.queue import QueueContract
from chongming.testing.store_contract.rates import RateLimitContract
from chongming.testing.store_contract.retention import RetentionContract
from chongming.testing.store_contract.schedules import ScheduleContract
from chongming.testing.store_contract.search import SearchContract
from chongming.testing.store_contract.snapshots import SnapshotContract
from chongming.testing.store_contract.spawn import SpawnContract
from chongming.testing.store_contract.trusted import TrustedWriteContract
from chongming.testing.store_contract.writes import WriteContract

__all__ = [
    "HOSTILE_STRINGS",
    "ActivityContract",
    "ChildContract",
    "ClusterLimitContract",
    "DurableContract",
    "EnqueueFactsContract",
    "GrantedClaimContract",
    "JournalContract",
    "PoolClaimContract",
    "RateLimitContract",
    "RetentionContract",
    "ScheduleContract",
    "SearchContract",
    "SpawnContract",
    "StartClaimedContract",
    "StoreContract",
    "TraceCarrierContract",
    "make_snapshot",
    "next_step",
]


class StoreContract(
    SnapshotContract,
    HistoryContract,
    CommandContract,
    NodeContract,
    WriteContract,
    TrustedWriteContract,
    QueueContract,
    PayloadContract,
    AnswerContract,
):
    """Behavioural tests for a :class:`~chongming.stores.base.TaskStore`.

    Subclass it as ``Test...`` and implement ``make_store``; see the package
    docstring for the hooks.
    """
