"""A claim that asks for rate-limit grants before it starts anything (``claim_granted``).

A rate-limited worker's claim: of the claimable tasks it takes (claim order),
each carrying a limited tag needs a start grant of that tag; the store grants
them per tag in one decision (:meth:`TaskStore.take_rate_grants`), what was
granted starts (``queued -> starting``, as a started claim writes it) and the
rest is left in the queue untouched. :func:`admit_by_grants` is that choice,
shared by the worker's gate and every backend, so they decide alike:

- tags are asked for in sorted order, each for the tasks still passing that
  carry it, in claim order; the first ``granted`` of them pass;
- a task carrying two limited tags takes the grants one tag at a time; if the
  second is refused, the first grant is spent unused (the limit is then
  under-used, never exceeded).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from chongming.errors import PayloadError
from chongming.stores.rates import RateGrant, check_rate_name

if TYPE_CHECKING:
    from chongming.stores.queue import ClaimedTask

__all__ = ["GrantAsk", "GrantedClaim", "TagsOf", "admit_by_grants", "check_grant_ask"]

_T = TypeVar("_T")

#: ``(name, version, the task's own tags)`` -> every tag it runs with (its
#: registration's too): what the claimer knows of a task it serves.
TagsOf = Callable[[str, int | None, frozenset[str]], frozenset[str]]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GrantAsk:
    """What a claim asks grants for: the limited tags, and how a task's tags are known."""

    limited: frozenset[str]
    tags_of: TagsOf


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GrantedClaim:
    """What a granted claim started, and each asked tag's decision."""

    started: list[ClaimedTask]
    grants: Mapping[str, RateGrant]
    #: Claimable tasks it took but could not start (no grant): left queued, nobody's.
    refused: int


def check_grant_ask(ask: object) -> GrantAsk:
    if not isinstance(ask, GrantAsk):
        raise PayloadError("grants", f"must be a GrantAsk, got {ask!r}")
    if not isinstance(ask.limited, frozenset):
        raise PayloadError("grants", "limited must be a frozenset of rate limit names")
    for name in ask.limited:
        check_rate_name(name)
    if not callable(ask.tags_of):
        raise PayloadError("grants", "tags_of must be callable")
    return ask


async def admit_by_grants(
    claimed: Sequence[_T],
    tags_of: Callable[[_T], Collection[str]],
    limited: Collection[str],
    take: Callable[[str, int], Awaitable[RateGrant]],
) -> tuple[list[_T], list[_T], dict[str, RateGrant]]:
    """Split ``claimed`` (in claim order) into what may start and what may not (see above)."""
    passing = list(claimed)
    refused: list[_T] = []
    grants: dict[str, RateGrant] = {}
    tags = [frozenset(tags_of(task)) for task in passing]
    for tag in sorted(limited):
        needing = [i for i, task in enumerate(passing) if tag in tags[i]]
        if not needing:
            continue
        grant = await take(tag, len(needing))
        grants[tag] = grant
        held_back = set(needing[grant.granted :])
        if held_back:
            refused.extend(passing[i] for i in sorted(held_back))
            passing = [task for i, task in enumerate(passing) if i not in held_back]
            tags = [t for i, t in enumerate(tags) if i not in held_back]
    return passing, refused, grants
