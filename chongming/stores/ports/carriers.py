"""Trace carriers: the enqueuer's trace context kept with a queued task (optional).

The carrier is written by :meth:`QueueStore.enqueue` in the same write as
the task; a worker that traces reads it after its claim. The default keeps
none (attempts then start traces of their own).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # these import stores.checks, which needs the records above
    pass

__all__ = ["CarrierStore"]


class CarrierStore(Protocol):
    """Read back the trace carriers stored with tasks at enqueue."""

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        """The trace carriers stored with these tasks at enqueue (ids without one are absent).

        Read by a worker after a plain :meth:`claim` when it traces. Optional:
        the default keeps none (attempts then start traces of their own).
        """
        return {}
