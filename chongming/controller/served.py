"""Which versions of a task name live workers serve: the pin of an unversioned enqueue."""

from __future__ import annotations

import asyncio
import logging

from chongming.stores.base import TaskStore
from chongming.stores.nodes import NodeRecord, served_by_live_nodes

__all__ = ["FIRST_VIEW_WAIT", "ServedVersions"]

_log = logging.getLogger("chongming.controller")
#: Seconds an enqueue inside the caller's transaction waits for a first view of the workers.
FIRST_VIEW_WAIT = 0.1


class ServedVersions:
    """What live workers serve, read from the node rows at most every ``ttl`` seconds.

    An unversioned enqueue of a name this process has not registered is
    pinned to the highest version a live worker serves, so a deploy of
    ``@N+1`` takes new work while ``@N`` drains. A name some live worker
    serves unversioned, or nobody serves, stays unversioned.

    Inside the caller's transaction (``wait=False``) the read must not be
    waited for: on SQLite it is a write (it raises the store clock), so it
    queues behind the write lock that very transaction holds, and the enqueue
    would wait out the busy timeout and fail. It then runs beside, on a task
    owned here, and the last view is used. The first such enqueue of a
    controller that has no view yet waits for one at most
    :data:`FIRST_VIEW_WAIT` seconds (once: on SQLite the read waits for the
    caller's commit, and a tight loop of transactions may hold it off longer).
    """

    __slots__ = ("_read_at", "_reading", "_served", "_store", "_ttl", "_waited")

    def __init__(self, store: TaskStore, ttl: float) -> None:
        self._store = store
        self._ttl = ttl
        self._read_at = float("-inf")
        self._served: frozenset[str] = frozenset()
        self._reading: asyncio.Task[None] | None = None
        self._waited = False

    async def highest(self, name: str, *, wait: bool = True) -> int | None:
        """The version to pin an unversioned enqueue of ``name`` to (``None``: unversioned).

        Concurrent enqueues that find the view stale share one read of the
        node rows (not one read each).
        """
        loop = asyncio.get_running_loop()
        if loop.time() - self._read_at > self._ttl:
            reading = self._reading
            if reading is None:
                reading = self._reading = loop.create_task(
                    self._read(), name="chongming:served-versions"
                )
                reading.add_done_callback(_read_done)
            if wait:
                await asyncio.shield(reading)  # its error is this enqueue's
            elif not self._waited and self._read_at == float("-inf"):
                self._waited = True
                await asyncio.wait([reading], timeout=FIRST_VIEW_WAIT)
        if name in self._served:
            return None
        prefix = name + "@"
        versions = [
            int(entry[len(prefix) :])
            for entry in self._served
            if entry.startswith(prefix) and entry[len(prefix) :].isdigit()
        ]
        return max(versions) if versions else None

    async def serves(self, name: str) -> bool:
        """Whether a live worker serves ``name`` (any version), by a view at most a TTL old."""
        await self.highest(name)  # reads the node rows again if the view is stale
        prefix = name + "@"
        return name in self._served or any(entry.startswith(prefix) for entry in self._served)

    def _take(self, nodes: list[NodeRecord], at: float) -> None:
        self._served = served_by_live_nodes(nodes)
        self._read_at = at

    async def _read(self) -> None:
        try:
            self._take(await self._store.nodes(), asyncio.get_running_loop().time())
        finally:
            self._reading = None

    async def aclose(self) -> None:
        """Stop a read in flight (the controller closes before its store)."""
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.cancel()
            await asyncio.wait([reading])


def _read_done(reading: asyncio.Task[None]) -> None:
    """A failed read leaves the view as it was; a later enqueue reads again."""
    if not reading.cancelled() and (error := reading.exception()) is not None:
        _log.debug("reading what live workers serve failed (%s)", error)
