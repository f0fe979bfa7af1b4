"""The in-memory store's rate limits: the GCRA rule on a dict, atomic by the event loop."""

from __future__ import annotations

from chongming.errors import UnknownRateLimit
from chongming.stores.memory.state import MemoryState
from chongming.stores.ports.rates import RateLimitStore
from chongming.stores.rates import (
    RateGrant,
    RateLimit,
    check_grant_request,
    check_rate_limit,
    check_rate_name,
    grant_starts,
)

__all__ = ["RateLimitsOnMemory"]


class RateLimitsOnMemory(MemoryState, RateLimitStore):
    """Declared limits and one theoretical arrival time per (limit, key)."""

    async def declare_rate_limit(self, name: str, limit: RateLimit) -> RateLimit:
        self._check_open()
        return self._rate_limits.setdefault(check_rate_name(name), check_rate_limit(limit))

    async def set_rate_limit(self, name: str, limit: RateLimit) -> None:
        self._check_open()
        self._rate_limits[check_rate_name(name)] = check_rate_limit(limit)

    async def take_rate_grants(self, name: str, *, key: str = "", want: int = 1) -> RateGrant:
        self._check_open()
        check_grant_request(name, key, want)
        limit = self._rate_limits.get(name)
        if limit is None:
            raise UnknownRateLimit(name)
        granted, tat, retry_after = grant_starts(
            tat=self._rate_tats.get((name, key)),
            now=self._now().timestamp(),
            limit=limit,
            want=want,
        )
        self._rate_tats[name, key] = tat
        return RateGrant(granted=granted, retry_after=retry_after)

    async def rate_limits(self) -> dict[str, RateLimit]:
        self._check_open()
        return dict(sorted(self._rate_limits.items()))
