"""``ControlPlane``: what a controller with a store adds — write-through and commands.

The controller composes one when given a store; its host calls
:meth:`record` on every transition. Nodes, leases and reconcile attach here
too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from chongming.control.commands import Apply, CommandPoller
from chongming.control.failures import PersistFailures
from chongming.control.writethrough import WriteThrough
from chongming.stores.base import TaskStore

__all__ = ["ControlPlane"]

_log = logging.getLogger("chongming.control")


class ControlPlane:
    """One controller's link to a shared store."""

    def __init__(
        self,
        store: TaskStore,
        *,
        owner: str,
        apply_command: Apply,
        on_let_go: Callable[[Any, str], None],
        poll_interval: float,
        lease_ttl: float,
    ) -> None:
        self.store = store
        self.owner = owner
        self.writer = WriteThrough(store, on_let_go=on_let_go)
        self.commands = CommandPoller(
            store,
            owner=owner,
            apply=apply_command,
            poll_interval=poll_interval,
            lease_seconds=max(poll_interval * 5, 5.0),
        )
        self.lease_ttl = lease_ttl

    async def start(self) -> None:
        """Connect (a store whose schema is newer than this code fails here) and start writing."""
        await self.store.open()
        self.writer.start()

    def serve_commands(self) -> None:
        """Start claiming commands: from the first submit on, never for a pure query client."""
        self.commands.start()

    def record(self, run: Any) -> None:
        self.writer.record(run)

    def failures(self) -> PersistFailures:
        return self.writer.failures()

    async def aclose(self, timeout: float) -> None:
        """Stop claiming commands, then write what is pending (bounded by ``timeout``)."""
        await self.commands.aclose(timeout)
        await self.writer.aclose(timeout)
