"""This process as a node of the plane: registered under its owner name, one lease renewed.

Renewal is one row whatever the number of tasks the node holds. The lease is
renewed every third of its ttl, so two missed renewals still leave it alive;
a renewal that finds the row taken by another incarnation means this node
was replaced (it was away past its lease and another process took the owner
name): it says so loudly and stops renewing.

What a worker serves is published in its row when it registers, again as
soon as :meth:`NodeLease.publish` is called (every registration on its
controller calls it: a worker that registers its tasks after it started is
a worker all the same), and checked at every renewal, so the row never
lags what the worker claims by more than a third of the ttl. Publishing is
a re-registration under the same incarnation (an upsert of the row, the
lease renewed with it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from collections.abc import Callable

from chongming.background import BackgroundTask
from chongming.errors import NodeConflict, StoreClosed, StoreError
from chongming.plane.takeover import held_here, holder_is_gone, let_go_here
from chongming.stores.base import TaskStore
from chongming.stores.nodes import NodeInfo

__all__ = ["NodeLease"]

_log = logging.getLogger("chongming.control")


class NodeLease:
    """Registers a node and keeps its lease alive until :meth:`aclose`."""

    def __init__(
        self,
        store: TaskStore,
        *,
        owner: str,
        num_buckets: int,
        owned_buckets: frozenset[int] | None,
        ttl: float,
        version: str,
    ) -> None:
        self._store = store
        self.info = NodeInfo(
            owner=owner,
            incarnation=os.urandom(8).hex(),
            host=socket.gethostname(),
            pid=os.getpid(),
            version=version,
            num_buckets=num_buckets,
            owned_buckets=owned_buckets,
        )
        self._ttl = ttl
        #: A worker's names and versions (``name`` / ``name@N``), read when it registers.
        self.serves: Callable[[], frozenset[str]] | None = None
        self._lease = BackgroundTask("chongming:node-lease")
        self._changed: asyncio.Event | None = None
        self.renewals = 0
        self.replaced = False
        #: The registration whose lease this node took over (its process was gone), if any:
        #: the tasks that process held under this owner name are its own to judge.
        self.took_over: NodeInfo | None = None

    @property
    def registered(self) -> bool:
        return self._lease.running

    async def register(self) -> None:
        """Register (raises :class:`NodeConflict` if a live node holds the name), then renew."""
        if self._lease.running:
            return
        if self.serves is not None:
            self.info = dataclasses.replace(self.info, serves=self.serves())
        try:
            await self._store.register_node(self.info, ttl_seconds=self._ttl)
        except NodeConflict:
            await self._take_over()
        held_here(self.info.incarnation)
        self._changed = asyncio.Event()
        self._lease.start(self._renew_forever)

    async def _take_over(self) -> None:
        """The name's live lease: take it over if its process is gone on this host, else raise.

        The release compares on the old incarnation, so a third process that
        took the name meanwhile keeps it (the second registration then raises).
        """
        owner = self.info.owner
        held = next((n for n in await self._store.nodes() if n.info.owner == owner), None)
        if held is None or not held.live:
            await self._store.register_node(self.info, ttl_seconds=self._ttl)  # it lapsed
            return
        old = held.info
        if not holder_is_gone(old.host, old.pid, old.incarnation, held.started_at):
            raise NodeConflict(owner, old.host, old.pid, lease_expires_at=held.lease_expires_at)
        _log.warning(
            "owner %r: taking over the lease of pid %d on this host (%s), which is gone "
            "(it did not release it: killed?); it would have lapsed at %s",
            owner,
            old.pid,
            old.host,
            held.lease_expires_at.isoformat(),
        )
        await self._store.release_node(owner, old.incarnation)
        await self._store.register_node(self.info, ttl_seconds=self._ttl)
        self.took_over = old

    def publish(self) -> None:
        """What this worker serves changed: write it to the row now (not at the next renewal).

        Loop thread only; before :meth:`register` it does nothing (the
        registration publishes what is served by then).
        """
        if self._changed is not None:
            self._changed.set()

    def _serves_changed(self) -> frozenset[str] | None:
        """What the row should say it serves, if that differs from what it says."""
        if self.serves is None:
            return None
        serves = self.serves()
        return None if serves == self.info.serves else serves

    async def renew_once(self) -> bool:
        """One renewal (publishing what is served, if it changed); False once replaced."""
        alive = await self._store.renew_node(
            self.info.owner, self.info.incarnation, ttl_seconds=self._ttl
        )
        self.renewals += 1
        serves = self._serves_changed() if alive else None
        if serves is not None:
            # Still ours (the renewal matched the incarnation): the upsert keeps it so.
            info = dataclasses.replace(self.info, serves=serves)
            await self._store.register_node(info, ttl_seconds=self._ttl)
            self.info = info
        return alive

    async def _renew_forever(self) -> None:
        interval = self._ttl / 3
        changed = self._changed
        assert changed is not None
        while True:
            try:
                async with asyncio.timeout(interval):
                    await changed.wait()
            except TimeoutError:
                pass
            changed.clear()
            try:
                alive = await self.renew_once()
            except StoreClosed:
                return
            except StoreError as error:
                _log.warning("could not renew the lease of node %r: %s", self.info.owner, error)
                continue
            if not alive:
                self.replaced = True
                _log.error(
                    "node %r was replaced by another process under the same owner name "
                    "(this one was away past its lease); it no longer renews",
                    self.info.owner,
                )
                return

    async def aclose(self) -> None:
        """Stop renewing and let the lease expire now (a clean exit is judged at once)."""
        if not self._lease.running:
            return
        await self._lease.stop()
        let_go_here(self.info.incarnation)
        if not self.replaced:
            try:
                await self._store.release_node(self.info.owner, self.info.incarnation)
            except StoreError as error:
                _log.warning("could not release the lease of node %r: %s", self.info.owner, error)
