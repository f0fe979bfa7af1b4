"""``QueuedTask``: a task enqueued through the store, followed from any process."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from chongming.errors import TaskFailed, TaskNotFound
from chongming.state.records import JsonValue, TaskSnapshot
from chongming.state.status import TaskStatus

if TYPE_CHECKING:
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
        """Wait until the task ended, wherever it runs; its final snapshot.

        ``timeout`` (seconds) raises :class:`TimeoutError` and leaves the task
        alone. On PostgreSQL the store's end notification wakes the wait at
        the commit that ended the task; the store is read again then, and at
        least every ``poll_interval`` of the controller (the only wake on
        SQLite and in memory).
        """
        async with asyncio.timeout(timeout):
            while True:
                # Listening before the read: an end committed during it still wakes us.
                hint = asyncio.ensure_future(self._store.wait_end_hint())
                try:
                    snapshot = await self.get()
                    if snapshot.is_terminal:
                        return snapshot
                    await asyncio.wait({hint}, timeout=self._poll)
                    if hint.done() and not hint.cancelled() and hint.exception() is not None:
                        # No notifications now (the read above says whether the
                        # store answers at all): poll until they come back.
                        await asyncio.sleep(self._poll)
                finally:
                    if not hint.done():
                        hint.cancel()
                    await asyncio.wait({hint})
                    if not hint.cancelled():
                        hint.exception()  # looked at: a failed hint is no error of the wait

    async def result(self, timeout: float | None = None) -> JsonValue:
        """The task's result once it succeeded; :class:`TaskFailed` if it ended otherwise.

        Waits as :meth:`wait` does (``timeout`` raises :class:`TimeoutError`
        and leaves the task alone).
        """
        snapshot = await self.wait(timeout)
        if snapshot.status is TaskStatus.SUCCEEDED:
            return snapshot.result
        failure = snapshot.failure
        message = failure.message if failure is not None else f"it ended {snapshot.status.value}"
        error_type = (failure.exception_type or "") if failure is not None else ""
        raise TaskFailed(self.task_id, snapshot.status.value, message, error_type)

    def __repr__(self) -> str:
        return f"<QueuedTask {self.task_id!r} created={self.created}>"
