"""Cluster-wide limits: slots of a named limit leased by live nodes (optional).

The pure decision is :func:`chongming.stores.limits.granted_slots`; a store
without cluster limits inherits defaults that raise ``NotImplementedError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # these import stores.checks, which needs the records above
    from chongming.stores.limits import ClusterLimit

__all__ = ["ClusterLimitStore"]


class ClusterLimitStore(Protocol):
    """Declare, set and lease cluster-wide limits (see the module docstring)."""

    # -- cluster-wide limits (stores/limits.py) -----------------------------------

    async def declare_cluster_limit(self, name: str, capacity: int) -> int:
        """Create cluster limit ``name`` with ``capacity`` unless it exists; the stored capacity.

        The store's value wins: a node declaring another capacity keeps the
        fleet's (change it with :meth:`set_cluster_limit`). Optional: a store
        without cluster limits raises ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")

    async def set_cluster_limit(self, name: str, capacity: int) -> None:
        """Create or change a cluster limit. Lowering it stops nothing that runs:
        nodes take no new slots until the holders are back under it."""
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")

    async def lease_cluster_slots(
        self, name: str, owner: str, incarnation: str, *, want: int, keep: int
    ) -> int:
        """Set how many slots of ``name`` this node holds; the number it holds now.

        One atomic decision by the store's clock
        (:func:`~chongming.stores.limits.granted_slots`): at least ``keep``,
        at most ``want``, new slots only from what live nodes leave free.
        Rows of nodes whose lease expired stop counting (and are dropped).
        An unknown ``name`` raises :class:`UnknownClusterLimit`.
        """
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")

    async def cluster_limits(self) -> list[ClusterLimit]:
        """Every cluster limit with the slots live nodes hold, by name."""
        raise NotImplementedError(f"{type(self).__name__} has no cluster limits")
