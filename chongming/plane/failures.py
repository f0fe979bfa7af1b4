"""What the store refused or could not take, as a controller reports it."""

from __future__ import annotations

import dataclasses
from datetime import datetime

__all__ = ["PersistFailures"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PersistFailures:
    """Write-through health at one moment.

    ``failed_writes`` counts state writes the store could not take (each is
    retried: nothing is dropped); ``pending_tasks`` and
    ``pending_transitions`` say what is still waiting for the store;
    ``failing_since`` is set while the store keeps failing. ``let_go`` names
    tasks this controller stopped writing for because the store had moved on
    without it (another node reconciled them while this one was away), with
    the reason.
    """

    failed_writes: int = 0
    pending_tasks: int = 0
    pending_transitions: int = 0
    last_error: str | None = None
    failing_since: datetime | None = None
    let_go: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return self.failing_since is None and self.pending_transitions == 0
