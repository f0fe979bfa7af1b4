"""A worker's gate on cluster-wide rate limits: a claimed task starts only with a grant.

For every rate limit the node declared, a claimed task carrying its tag
needs a start grant from the store before it starts
(:meth:`TaskStore.take_rate_grants`, one atomic decision for all the tasks
of one claim that carry the tag). A worker whose admission launches at once
claims through :meth:`TaskStore.claim_granted`, which decides the grants
inside the claim and starts only what was granted (:meth:`decided` hears
the answer); one under admission limits claims ``queued`` and asks here,
before admission (:meth:`gate`). Either way:

- what the store grants starts; what it does not stays in (or is given back
  to) the queue at once: it held no execution slot and is claimable by any
  worker again;
- the store also says when the next grant is due (``retry_after``); until
  then the tag is *blocked* here: the claim loop leaves tasks carrying it in
  the store (``exclude_tags``) and claims other work, and a timer wakes the
  loop when the grant is due, so nothing polls hot;
- a task carrying two rate-limited tags takes the grants one tag at a time;
  if the second is refused, the first grant is spent unused (the limit is
  under-used then, never exceeded).

A store failure while asking counts as a refusal for that claim (logged; the
tasks go back to the queue) and blocks the tag for one poll interval.

Owned by the worker: started with it (declaring the limits; the store's
value wins over a different declaration), closed with it (its timer
cancelled).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar

from chongming.errors import ChongmingError, StoreClosed, StoreError
from chongming.state.records import TaskSnapshot
from chongming.stores.base import TaskStore
from chongming.stores.rates import RateGrant, RateLimit

__all__ = ["RateGate", "claim_exclusions"]

_log = logging.getLogger("chongming.control")
_T = TypeVar("_T")


class RateGate:
    """See the module docstring."""

    def __init__(
        self,
        store: TaskStore,
        limits: Mapping[str, RateLimit],
        *,
        wake: Callable[[], None],
        poll_interval: float,
    ) -> None:
        self._store = store
        self._declared = dict(limits)
        self._wake = wake
        self._poll = poll_interval
        #: The fleet's limit of each tag as the store holds it (read at start).
        self.limits: dict[str, RateLimit] = {}
        #: tag -> the loop time its next grant is due (absent: due now).
        self._due: dict[str, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.granted = 0
        self.refused = 0

    @property
    def tags(self) -> frozenset[str]:
        return frozenset(self._declared)

    async def start(self) -> None:
        """Declare the limits (the store's value holds for the fleet)."""
        for name, limit in self._declared.items():
            stored = await self._store.declare_rate_limit(name, limit)
            self.limits[name] = stored
            if stored != limit:
                _log.warning(
                    "rate limit %r is %s in the store (this node declared %s); "
                    "the store's value holds for the fleet",
                    name,
                    stored,
                    limit,
                )

    def blocked(self) -> frozenset[str]:
        """Tags whose next grant is not due yet: the claim leaves their tasks alone."""
        if not self._due:
            return frozenset()
        now = asyncio.get_running_loop().time()
        for tag in [tag for tag, due in self._due.items() if due <= now]:
            del self._due[tag]
        return frozenset(self._due)

    async def admit(
        self, claimed: Sequence[_T], tags_of: Callable[[_T], frozenset[str]]
    ) -> tuple[list[_T], list[_T]]:
        """Split ``claimed`` (in claim order) into what may start now and what goes back."""
        passing = list(claimed)
        refused: list[_T] = []
        for tag in sorted(self._declared):
            needing = [task for task in passing if tag in tags_of(task)]
            if not needing:
                continue
            granted = await self._take(tag, len(needing))
            if granted < len(needing):
                held_back = needing[granted:]
                refused.extend(held_back)
                kept = set(map(id, held_back))
                passing = [task for task in passing if id(task) not in kept]
        self.refused += len(refused)
        return passing, refused

    async def gate(
        self,
        claimed: list[TaskSnapshot],
        tags_of: Callable[[TaskSnapshot], frozenset[str]],
        *,
        owner: str,
    ) -> list[TaskSnapshot]:
        """What of a claim may start now; the rest is released to the queue at once."""
        passing, refused = await self.admit(claimed, tags_of)
        for task in refused:
            task_id, version = task.task_id, task.status_version
            try:
                await self._store.release_claim(task_id, owner, version)
            except ChongmingError as error:
                # Still ours in the store: reconcile sees a dead owner's queued task.
                _log.warning("could not give %r back to the queue: %s", task_id, error)
        if refused:
            self._wake()  # the room they leave goes to other work now
        return passing

    def decided(self, grants: Mapping[str, RateGrant], refused: int) -> None:
        """What a claim that took its grants in the store was told (``claim_granted``).

        Each tag whose next grant is not due yet is blocked until it is; the
        tasks it refused stayed in the queue, so other work is claimed now.
        """
        loop = asyncio.get_running_loop()
        for tag, grant in grants.items():
            self.granted += grant.granted
            if grant.retry_after > 0:
                self._block(tag, loop.time() + grant.retry_after)
        self.refused += refused
        if refused:
            self._wake()

    async def _take(self, tag: str, want: int) -> int:
        loop = asyncio.get_running_loop()
        try:
            grant = await self._store.take_rate_grants(tag, want=want)
        except StoreClosed:
            raise
        except StoreError as error:
            _log.warning("asking for start grants of %r failed (%s); retrying", tag, error)
            self._block(tag, loop.time() + self._poll)
            return 0
        self.granted += grant.granted
        if grant.retry_after > 0:
            self._block(tag, loop.time() + grant.retry_after)
        return grant.granted

    def _block(self, tag: str, due: float) -> None:
        self._due[tag] = due
        timer = self._timer
        if timer is not None and timer.when() <= due:
            return  # an earlier wake is set: it looks again, and sets the next
        if timer is not None:
            timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.blocked()  # forget what came due: the claim loop may take it again
        self._wake()
        if self._due:  # the next tag to come due gets its own wake
            self._timer = asyncio.get_running_loop().call_at(min(self._due.values()), self._fire)

    def aclose(self) -> None:
        """Cancel the wake timer (nothing else runs in the background)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def claim_exclusions(
    given: Callable[[], Collection[str]] | None,
    fixed: frozenset[str],
    rates: RateGate | None,
) -> Callable[[], Collection[str]] | None:
    """What a worker's claim leaves alone: ``given`` (cluster limits), a pool's ``fixed``
    excluded tags, and the rate-limited tags whose next grant is not due yet."""
    if rates is None and not fixed:
        return given

    def excluded() -> Collection[str]:
        left = fixed if rates is None else fixed | rates.blocked()
        return left if given is None else left | frozenset(given())

    return excluded
