"""Cluster-wide rate limits: how many tasks with a tag may start per period (optional).

The records and the pure decision are :mod:`chongming.stores.rates`; a store
without rate limits inherits defaults that raise ``NotImplementedError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # stores.rates imports stores.checks, which needs the records
    from chongming.stores.rates import RateGrant, RateLimit

__all__ = ["RateLimitStore"]


class RateLimitStore(Protocol):
    """Declare, set and take grants of cluster-wide rate limits (see the module docstring)."""

    async def declare_rate_limit(self, name: str, limit: RateLimit) -> RateLimit:
        """Create rate limit ``name`` unless it exists; the limit the store holds.

        The store's value wins: a node declaring another rate keeps the
        fleet's (change it with :meth:`set_rate_limit`). Optional: a store
        without rate limits raises ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} has no rate limits")

    async def set_rate_limit(self, name: str, limit: RateLimit) -> None:
        """Create or change a rate limit; the next decision uses it (grants already
        given stand, and the time they used up stays used)."""
        raise NotImplementedError(f"{type(self).__name__} has no rate limits")

    async def take_rate_grants(self, name: str, *, key: str = "", want: int = 1) -> RateGrant:
        """Take up to ``want`` start grants of ``name`` (for ``key``) now: one atomic decision.

        By the store's clock and :func:`~chongming.stores.rates.grant_starts`;
        each key of a limit has its own row (``""``: the one shared key). A
        grant is used up when given, whether or not the caller starts
        anything: a call whose answer was lost costs grants, never adds any.
        An unknown ``name`` raises :class:`UnknownRateLimit`.

        Cancellation: the decision may still commit (grants lost, never extra).
        """
        raise NotImplementedError(f"{type(self).__name__} has no rate limits")

    async def rate_limits(self) -> dict[str, RateLimit]:
        """Every rate limit the store holds, by name."""
        raise NotImplementedError(f"{type(self).__name__} has no rate limits")
