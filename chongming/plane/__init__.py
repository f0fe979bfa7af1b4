"""The control plane: a controller as one node of a shared store.

Write-through of every transition, read-through of other processes' tasks,
commands across processes, node leases and reconcile. Names are imported on
first use, so a controller without a store never loads a store backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming.exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from chongming.plane.failures import PersistFailures as PersistFailures
    from chongming.plane.location import open_store as open_store

_WHERE: dict[str, str] = {
    "PersistFailures": "chongming.plane.failures",
    "open_store": "chongming.plane.location",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, globals())
