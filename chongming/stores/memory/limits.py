"""The in-memory store's cluster-wide limits."""

from __future__ import annotations

from datetime import datetime

from chongming.errors import UnknownClusterLimit
from chongming.stores.limits import (
    ClusterLimit,
    check_capacity,
    check_lease,
    check_limit_name,
    granted_slots,
)
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.limits import ClusterLimitStore

__all__ = ["ClusterLimitsOnMemory"]


class ClusterLimitsOnMemory(MemoryState, ClusterLimitStore):
    """Slots of named limits held by live nodes."""

    async def declare_cluster_limit(self, name: str, capacity: int) -> int:
        self._check_open()
        return self._cluster_limits.setdefault(check_limit_name(name), check_capacity(capacity))

    async def set_cluster_limit(self, name: str, capacity: int) -> None:
        self._check_open()
        self._cluster_limits[check_limit_name(name)] = check_capacity(capacity)

    def _holds(self, owner: str, incarnation: str, now: datetime) -> bool:
        node = self._own_node(owner, incarnation)
        return node is not None and node.lease_expires_at > now

    async def lease_cluster_slots(
        self, name: str, owner: str, incarnation: str, *, want: int, keep: int
    ) -> int:
        self._check_open()
        check_lease(name, owner, incarnation, want, keep)
        if name not in self._cluster_limits:
            raise UnknownClusterLimit(name)
        now = self._now()
        others = 0
        for (limit, holder), (inc, count) in list(self._slots.items()):
            if limit != name:
                continue
            if not self._holds(holder, inc, now):
                del self._slots[limit, holder]
            elif holder != owner:
                others += count
        held = granted_slots(
            capacity=self._cluster_limits[name],
            held_by_others=others,
            want=want,
            keep=keep,
            live=self._holds(owner, incarnation, now),
        )
        if held:
            self._slots[name, owner] = (incarnation, held)
        else:
            self._slots.pop((name, owner), None)
        return held

    async def cluster_limits(self) -> list[ClusterLimit]:
        self._check_open()
        now = self._now()
        holders: dict[str, dict[str, int]] = {}
        for (limit, holder), (inc, count) in sorted(self._slots.items()):
            if self._holds(holder, inc, now):
                holders.setdefault(limit, {})[holder] = count
        return [
            ClusterLimit(name=name, capacity=capacity, holders=holders.get(name, {}))
            for name, capacity in sorted(self._cluster_limits.items())
        ]
