"""A worker's claim loop: take queued tasks it serves whenever it has room to run them.

It claims no more than it has free execution slots, so a task waits in the
store (where any node can take it, in priority order) rather than in one
worker's local queue; for the same reason it can leave alone tasks carrying
tags it could not start now (``exclude_tags``, asked before every claim). It
is woken early when a slot frees or this process enqueues, and otherwise
polls every ``poll_interval``. A store failure is
logged and retried with a backoff; claiming never stops the node.
"""

from __future__ import annotations

import asyncio
import logging
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime
from typing import Any

from chongming.background import BackgroundTask, cancel_and_join
from chongming.errors import StoreClosed, StoreError
from chongming.state.records import TaskSnapshot
from chongming.stores.base import TaskStore
from chongming.stores.queue import ClaimedTask, Serves

__all__ = ["ClaimLoop"]

_log = logging.getLogger("chongming.control")
_BACKOFF_MAX = 5.0
_CLOSED = object()


class ClaimLoop:
    """Owned by the controller of a worker: started with it, closed before its shutdown."""

    def __init__(
        self,
        store: TaskStore,
        *,
        owner: str,
        serves: Callable[[], Serves],
        buckets: Collection[int] | None,
        free_slots: Callable[[], int],
        adopt: Callable[[list[TaskSnapshot]], Awaitable[None]],
        poll_interval: float,
        batch: int = 128,  # a claim is a round trip: many tasks per trip
        exclude_tags: Callable[[], Collection[str]] | None = None,
        start_at: Callable[[], datetime | None] | None = None,
        adopt_started: Callable[[list[ClaimedTask]], Awaitable[None]] | None = None,
        tags: Collection[str] | None = None,
        age_step: float | None = None,
        claim_started: Callable[..., Awaitable[list[ClaimedTask]]] | None = None,
    ) -> None:
        self._store = store
        #: How a started claim is made: the store's, or the caller's (a rate-limited
        #: worker claims through its grants), called as ``store.claim_started`` is.
        self._claim_started = claim_started
        #: A pool's tags (only tasks carrying one of them) and its aging step: passed
        #: only when set, so a store from before pools still serves a worker without.
        self._pool: dict[str, Any] = {} if tags is None else {"tags": tags}
        if age_step is not None:
            self._pool["age_step"] = age_step
        self._exclude_tags = exclude_tags
        # A time from start_at: this claim also starts what it takes (adopt_started gets it).
        self._start_at = start_at if adopt_started is not None else None
        self._adopt_started = adopt_started
        self._owner = owner
        self._serves = serves
        self._buckets = buckets
        self._free_slots = free_slots
        self._adopt = adopt
        self._poll = poll_interval
        self._batch = batch
        self._wake: asyncio.Event | None = None
        self._loop = BackgroundTask("chongming:claims")
        #: Claims in flight (each adopts what it took before it ends) -> the room it asked for.
        self._inflight: dict[asyncio.Future[int], int] = {}
        self._hint: asyncio.Task[None] | None = None
        self.claimed = 0

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._loop.start(self._claim_forever)

    def wake(self) -> None:
        """Look again now: a slot freed, or a task was enqueued here."""
        if self._wake is not None:
            self._wake.set()

    async def aclose(self) -> None:
        """Stop claiming; claims in flight are awaited to their end (what they took is adopted)."""
        if not self._loop.running:
            return
        await self._loop.stop()
        hint, self._hint = self._hint, None
        if hint is not None:
            # Cancelled, or the store's failure: nobody waits for it any more.
            await cancel_and_join(hint)
        inflight, self._inflight = self._inflight, {}
        for claim in inflight:
            try:
                await claim
            except Exception as error:
                _log.warning("the last claim before closing failed (%s)", error)

    async def _claim_forever(self) -> None:
        wake = self._wake
        assert wake is not None
        backoff = self._poll
        more = True  # the last answer held all it asked for: the queue may hold more
        asking: asyncio.Future[int | None] | None = None  # the answer of the claim out now
        asked = 0  # the room that claim asked for
        while True:
            if not more and not self._inflight:
                if await self._idle(wake) is _CLOSED:
                    return
                more = True
            wake.clear()
            # One claim out at a time (a worker's claims stay in order), but the next goes
            # out as soon as one is answered: the store works on it while this process
            # adopts what the last one took.
            if asking is None and (more or not self._inflight):
                asked = min(self._free_slots() - sum(self._inflight.values()), self._batch)
                if asked > 0:
                    asking = asyncio.get_running_loop().create_future()
                    self._inflight[asyncio.ensure_future(self._claim(asked, asking))] = asked
            if not self._inflight:  # no free slot: until one frees (or a poll)
                if await self._idle(wake) is _CLOSED:
                    return
                continue
            woken: asyncio.Future[Any] = asyncio.ensure_future(wake.wait())
            waiting: set[asyncio.Future[Any]] = {woken, *self._inflight}
            if asking is not None:
                waiting.add(asking)
            try:
                done, _ = await asyncio.wait(waiting, return_when=FIRST_COMPLETED)
            finally:
                woken.cancel()
            if asking is not None and asking.done():
                more = asking.result() == asked
                asking = None
            for claim in [claim for claim in self._inflight if claim in done]:
                del self._inflight[claim]
                try:
                    claim.result()
                except StoreClosed:
                    return
                except StoreError as error:
                    _log.warning("claiming queued tasks failed (%s); retrying", error)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _BACKOFF_MAX)
                    more = True  # look again after the backoff
                    continue
                backoff = self._poll

    async def _idle(self, wake: asyncio.Event) -> object:
        """Until a local wake, a store hint (PostgreSQL NOTIFY on enqueue) or the poll interval."""
        hint = self._hint
        if hint is None or hint.done():
            if hint is not None and not hint.cancelled():
                error = hint.exception()
                if isinstance(error, StoreClosed):
                    return _CLOSED
                if error is not None:
                    _log.warning("waiting for enqueue hints failed (%s); polling", error)
                    await asyncio.sleep(self._poll)
            hint = self._hint = asyncio.ensure_future(self._store.wait_queue_hint())
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait([woken, hint], timeout=self._poll, return_when=FIRST_COMPLETED)
        finally:
            woken.cancel()
        return None

    async def _claim(self, room: int, answered: asyncio.Future[int | None]) -> int:
        """One claim and the adoption of everything it took (never cut in half); how many.

        ``answered`` gets the count as soon as the store answers (``None`` if it
        failed), before the adoption, so the next claim can go out meanwhile.
        """
        try:
            plain, started = await self._take(room)
        except BaseException:
            answered.set_result(None)
            raise
        count = len(plain) + len(started)
        answered.set_result(count)
        if count:
            await asyncio.sleep(0)  # the next claim goes out first (see _claim_forever)
            try:
                if started:
                    assert self._adopt_started is not None
                    await self._adopt_started(started)
                else:
                    await self._adopt(plain)
            except StoreError:
                raise
            except Exception:
                _log.exception("adopting %d claimed tasks failed", count)
        self.claimed += count
        return count

    async def _take(self, room: int) -> tuple[list[TaskSnapshot], list[ClaimedTask]]:
        """The store's claim (plain, or started in the same step when ``start_at`` says now)."""
        serves = self._serves()
        if not serves:
            return [], []
        excluded = () if self._exclude_tags is None else self._exclude_tags()
        at = None if self._start_at is None else self._start_at()
        store, owner, buckets = self._store, self._owner, self._buckets
        if at is not None and self._adopt_started is not None:
            claim_started = self._claim_started or store.claim_started
            started = await claim_started(
                owner,
                serves=serves,
                buckets=buckets,
                limit=room,
                exclude_tags=excluded,
                at=at,
                **self._pool,
            )
            return [], started
        plain = await store.claim(
            owner, serves=serves, buckets=buckets, limit=room, exclude_tags=excluded, **self._pool
        )
        return plain, []
