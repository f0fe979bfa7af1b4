"""The control plane: a controller as one node of a shared store.

Write-through of every transition, read-through of other processes' tasks,
commands across processes, node leases and reconcile. Names are imported on
first use, so a controller without a store never loads a store backend.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chongming.control.failures import PersistFailures as PersistFailures
    from chongming.control.location import open_store as open_store

_WHERE: dict[str, str] = {
    "PersistFailures": "chongming.control.failures",
    "open_store": "chongming.control.location",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value
