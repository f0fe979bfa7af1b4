"""Task stores: the port and its backends.

Names are imported on first use: ``import chongming.stores`` loads neither
aiosqlite nor asyncpg, and a controller that names no store loads no backend.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chongming.stores.base import Command as Command
    from chongming.stores.base import CommandKind as CommandKind
    from chongming.stores.base import TaskStore as TaskStore
    from chongming.stores.memory import InMemoryTaskStore as InMemoryTaskStore
    from chongming.stores.sqlite import SqliteTaskStore as SqliteTaskStore

_WHERE: dict[str, str] = {
    "Command": "chongming.stores.base",
    "CommandKind": "chongming.stores.base",
    "TaskStore": "chongming.stores.base",
    "InMemoryTaskStore": "chongming.stores.memory",
    "SqliteTaskStore": "chongming.stores.sqlite",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value
