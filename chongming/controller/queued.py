"""``QueuedTask``: a task enqueued through the store, followed from any process."""

from __future__ import annotations

import asyncio

from chongming.errors import TaskNotFound
from chongming.state.records import TaskSnapshot
from chongming.stores.base import TaskStore

__all__ = ["QueuedTask"]


class QueuedTask:
    """A task enqueued through the store: follow it from any process."""

    __slots__ = ("_poll", "_store", "created", "snapshot", "task_id")

    def __init__(
        self, store: TaskStore, snapshot: TaskSnapshot, *, created: bool, poll: float
    ) -> None:
        self._store = store
        self._poll = poll
        self.task_id = snapshot.task_id
        #: False when an idempotency key answered with a task enqueued earlier.
        self.created = created
        #: The task as the store held it when ``enqueue`` returned.
        self.snapshot = snapshot

    async def get(self) -> TaskSnapshot:
        """The task as the store holds it now."""
        found = await self._store.get(self.task_id)
        if found is None:
            raise TaskNotFound(self.task_id)
        return found

    async def wait(self, timeout: float | None = None) -> TaskSnapshot:
        """Poll the store until the task ended; its final snapshot.

        ``timeout`` (seconds) raises :class:`TimeoutError` and leaves the task
        alone. The store is read every ``poll_interval`` of the controller.
        """
        async with asyncio.timeout(timeout):
            while True:
                snapshot = await self.get()
                if snapshot.is_terminal:
                    return snapshot
                await asyncio.sleep(self._poll)

    def __repr__(self) -> str:
        return f"<QueuedTask {self.task_id!r} created={self.created}>"
