"""``Controller(cluster_limits=...)``: checked once, then wired to the node's admission queue."""

from __future__ import annotations

from collections.abc import Mapping

from chongming.controller.host import ControllerHost
from chongming.errors import ConfigurationError, PayloadError
from chongming.plane.cluster_slots import ClusterSlots
from chongming.plane.plane import ControlPlane
from chongming.stores.base import TaskStore
from chongming.stores.limits import check_capacity, check_limit_name

__all__ = ["check_cluster_limits", "cluster_slots_for"]


def check_cluster_limits(limits: object) -> dict[str, int]:
    """A mapping of tag to fleet capacity; every fault named as a configuration error."""
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise ConfigurationError(
            f"cluster_limits must be a mapping of tag to capacity, got {type(limits).__name__}"
        )
    checked: dict[str, int] = {}
    for name, capacity in limits.items():
        try:
            checked[check_limit_name(name)] = check_capacity(capacity)
        except PayloadError as error:
            raise ConfigurationError(f"cluster_limits[{name!r}]: {error}") from None
    return checked


def cluster_slots_for(
    limits: Mapping[str, int],
    *,
    plane: ControlPlane | None,
    host: ControllerHost,
    poll_interval: float,
) -> ClusterSlots | None:
    """The balancer of a controller's cluster limits (``None`` when it declares none)."""
    if not limits:
        return None
    if plane is None:
        raise ConfigurationError(
            "cluster_limits need a store shared by the fleet: Controller(store=...)"
        )
    store = plane.store
    if type(store).lease_cluster_slots is TaskStore.lease_cluster_slots:
        raise ConfigurationError(f"{type(store).__name__} has no cluster-wide limits")
    node = plane.node
    slots = ClusterSlots(
        store,
        limits,
        owner=plane.owner,
        incarnation=lambda: node.info.incarnation,
        demand=host.demand,
        set_leased=host.set_leased,
        become_node=plane.become_node,
        poll_interval=poll_interval,
    )
    host.on_demand = slots.touch
    return slots
