"""A node's share of the cluster-wide limits: lease the slots its tasks need, give back the rest.

For every cluster limit the node declared, the admission queue holds the
limit's tag as a *leased* tag: its local limit is the slots this node holds
in the store. The balancer leases what the node wants (its running plus its
waiting tasks with the tag) and gives back what it no longer needs, so:

- the local limit is lowered *before* the store is told (never above what
  the store grants), and raised only *after* the store granted it;
- a slot that frees while another task with the tag waits here is reused at
  once, without a round trip;
- while the fleet is full, the node asks again every ``poll_interval`` (a
  dead node's slots come back when its lease expires, judged by the store);
- a store failure is logged and retried; the node keeps what it holds.

Owned by the controller: started after the node exists, closed after the
runs ended (it then gives every slot back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping

from chongming.background import BackgroundTask
from chongming.errors import StoreClosed, StoreError
from chongming.stores.base import TaskStore

__all__ = ["ClusterSlots"]

_log = logging.getLogger("chongming.control")


class ClusterSlots:
    """See the module docstring."""

    def __init__(
        self,
        store: TaskStore,
        limits: Mapping[str, int],
        *,
        owner: str,
        incarnation: Callable[[], str],
        demand: Callable[[str], tuple[int, int]],
        set_leased: Callable[[str, int], None],
        become_node: Callable[[], Awaitable[None]],
        poll_interval: float,
    ) -> None:
        self._store = store
        self._declared = dict(limits)
        self._owner = owner
        self._incarnation = incarnation
        self._demand = demand
        self._set_leased = set_leased
        self._become_node = become_node
        self._poll = poll_interval
        self._held: dict[str, int] = dict.fromkeys(limits, 0)
        #: The fleet's capacity of each limit as the store holds it (read at start).
        self.capacities: dict[str, int] = {}
        self._wake: asyncio.Event | None = None
        self._balancer = BackgroundTask("chongming:cluster-slots")

    @property
    def held(self) -> Mapping[str, int]:
        """Slots this node holds now, by limit."""
        return dict(self._held)

    async def start(self) -> None:
        """Declare the limits (the store's capacity wins over a different declaration)."""
        for name, capacity in self._declared.items():
            stored = await self._store.declare_cluster_limit(name, capacity)
            self.capacities[name] = stored
            if stored != capacity:
                _log.warning(
                    "cluster limit %r is %d in the store (this node declared %d); "
                    "the store's value holds for the fleet",
                    name,
                    stored,
                    capacity,
                )
        self._wake = asyncio.Event()
        self._balancer.start(self._balance_forever)

    def touch(self, tags: Collection[str]) -> None:
        """A task with these tags was queued here, or left a slot: balance again."""
        if self._wake is not None and any(tag in self._held for tag in tags):
            self._wake.set()

    def blocked(self) -> frozenset[str]:
        """Limits a task waits for here: a worker claims no more tasks carrying them."""
        return frozenset(tag for tag in self._held if self._demand(tag)[1] > 0)

    async def aclose(self) -> None:
        """Stop balancing and give back every slot no task here still runs."""
        if not self._balancer.running:
            return
        await self._balancer.stop()
        for tag, held in self._held.items():
            if held == 0:
                continue
            running, _ = self._demand(tag)
            self._set_leased(tag, running)
            try:
                self._held[tag] = await self._lease(tag, want=running, keep=running)
            except StoreError as error:
                # Not fatal: the slots come back when this node's lease lapses.
                _log.warning("could not give back the slots of %r: %s", tag, error)

    async def _balance_forever(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            wake.clear()
            try:
                short = await self._balance()
            except StoreClosed:
                return
            except StoreError as error:
                _log.warning("leasing cluster slots failed (%s); retrying", error)
                short = True
            if short:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll):
                        await wake.wait()
            else:
                await wake.wait()

    async def _balance(self) -> bool:
        """One pass over the limits; True when some limit has fewer slots than it wants."""
        short = False
        for tag, held in self._held.items():
            running, waiting = self._demand(tag)
            want = running + waiting
            if want == held:
                continue
            if want < held:
                # Lowered here first: never above the store. ``_held`` stays the
                # store's view until it answers, so a failed give-back is retried.
                self._set_leased(tag, want)
            else:
                await self._become_node()
            # keep: what this node may be running by the time the store answers.
            granted = await self._lease(tag, want=want, keep=min(held, want))
            self._held[tag] = granted
            self._set_leased(tag, granted)
            short = short or granted < want
        return short

    async def _lease(self, tag: str, *, want: int, keep: int) -> int:
        return await self._store.lease_cluster_slots(
            tag, self._owner, self._incarnation(), want=want, keep=keep
        )
