"""This process as a node of the plane: registered under its owner name, one lease renewed.

Renewal is one row whatever the number of tasks the node holds. The lease is
renewed every third of its ttl, so two missed renewals still leave it alive;
a renewal that finds the row taken by another incarnation means this node
was replaced (it was away past its lease and another process took the owner
name): it says so loudly and stops renewing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from collections.abc import Callable

from chongming.errors import StoreClosed, StoreError
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
        self._task: asyncio.Task[None] | None = None
        self.renewals = 0
        self.replaced = False

    @property
    def registered(self) -> bool:
        return self._task is not None

    async def register(self) -> None:
        """Register (raises :class:`NodeConflict` if a live node holds the name), then renew."""
        if self._task is not None:
            return
        if self.serves is not None:
            self.info = dataclasses.replace(self.info, serves=self.serves())
        await self._store.register_node(self.info, ttl_seconds=self._ttl)
        self._task = asyncio.get_running_loop().create_task(
            self._renew_forever(), name="chongming:node-lease"
        )

    async def renew_once(self) -> bool:
        """One renewal; False once this node was replaced."""
        alive = await self._store.renew_node(
            self.info.owner, self.info.incarnation, ttl_seconds=self._ttl
        )
        self.renewals += 1
        return alive

    async def _renew_forever(self) -> None:
        interval = self._ttl / 3
        while True:
            await asyncio.sleep(interval)
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
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        if not self.replaced:
            try:
                await self._store.release_node(self.info.owner, self.info.incarnation)
            except StoreError as error:
                _log.warning("could not release the lease of node %r: %s", self.info.owner, error)
