"""Records of cluster-wide limits: named caps shared by every node on one store.

A *cluster limit* says how many tasks carrying a tag may run at once across
the fleet (``vendor-api: 3``). Nodes hold its slots as rows in the store,
each row under the node's owner and incarnation; a row counts only while
that node's lease is live by the store's clock, so the slots of a node that
died come back when its lease expires, without anybody cleaning up.

A node leases slots for the tasks it has waiting and running, and gives back
what it no longer needs; every lease is one atomic decision in the store
(``lease_cluster_slots``). The backends implement it; these are the records
and the checks every backend applies alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from chongming.errors import PayloadError
from chongming.stores.checks import check_text

__all__ = [
    "MAX_CLUSTER_CAPACITY",
    "MAX_LIMIT_NAME",
    "ClusterLimit",
    "check_capacity",
    "check_lease",
    "check_limit_name",
    "granted_slots",
]

#: Longest limit name (characters): a tag, short by nature.
MAX_LIMIT_NAME = 200
#: The largest capacity a store accepts (a cap beyond that is no cap).
MAX_CLUSTER_CAPACITY = 1_000_000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLimit:
    """A cluster limit as read: its capacity and the slots live nodes hold now.

    ``holders`` maps owner name to slots held, live nodes only (judged by the
    store's clock when read); a dead node's slots are already free.
    """

    name: str
    capacity: int
    holders: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "holders", MappingProxyType(dict(self.holders)))

    @property
    def held(self) -> int:
        return sum(self.holders.values())

    @property
    def free(self) -> int:
        return max(self.capacity - self.held, 0)


def check_limit_name(name: object) -> str:
    if not isinstance(name, str):
        raise PayloadError("cluster limit name", f"must be a string, got {type(name).__name__}")
    if not name or len(name) > MAX_LIMIT_NAME:
        raise PayloadError("cluster limit name", f"must have 1 to {MAX_LIMIT_NAME} characters")
    check_text(name, "cluster limit name")
    if not name.isprintable():
        raise PayloadError("cluster limit name", "must not contain control characters")
    return name


def check_capacity(capacity: object) -> int:
    if (
        isinstance(capacity, bool)
        or not isinstance(capacity, int)
        or not 1 <= capacity <= MAX_CLUSTER_CAPACITY
    ):
        raise PayloadError(
            "cluster limit capacity",
            f"must be an integer from 1 to {MAX_CLUSTER_CAPACITY}, got {capacity!r}",
        )
    return capacity


def check_lease(
    name: object, owner: object, incarnation: object, want: object, keep: object
) -> None:
    """The arguments of ``TaskStore.lease_cluster_slots``, refused alike by every backend."""
    check_limit_name(name)
    for what, text in (("owner", owner), ("incarnation", incarnation)):
        if not isinstance(text, str) or not text:
            raise PayloadError(what, "must be a non-empty string")
        check_text(text, what)
    for what, count in (("want", want), ("keep", keep)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise PayloadError(what, f"must be an integer >= 0, got {count!r}")
    if keep > want:  # type: ignore[operator]
        raise PayloadError("keep", f"must not exceed want ({keep} > {want})")


def granted_slots(*, capacity: int, held_by_others: int, want: int, keep: int, live: bool) -> int:
    """How many slots a node holds after a lease: the one rule every backend applies.

    Never below ``keep`` (the tasks it runs now: a lease cannot stop them),
    never more than it wants, and new slots only out of what live others
    leave free. A node whose own lease is not live gets nothing new (its
    peers no longer count it), only what it keeps.
    """
    if not live:
        return keep
    return max(keep, min(want, capacity - held_by_others))
