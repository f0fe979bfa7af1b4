"""Task stores: the port and its backends.

Importing this package imports no backend and no driver: the names below are
resolved on first use (module ``__getattr__``), so a controller without a
store never pays for SQLite's or PostgreSQL's modules, nor for aiosqlite or
asyncpg.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chongming.stores.base import TaskStore as TaskStore
    from chongming.stores.memory import InMemoryTaskStore as InMemoryTaskStore
    from chongming.stores.nodes import Command as Command
    from chongming.stores.nodes import CommandKind as CommandKind
    from chongming.stores.sqlite import SqliteTaskStore as SqliteTaskStore

__all__ = ["Command", "CommandKind", "InMemoryTaskStore", "SqliteTaskStore", "TaskStore"]

#: Exported name -> the module that defines it (imported on first access).
_LAZY = {
    "Command": "chongming.stores.nodes",
    "CommandKind": "chongming.stores.nodes",
    "TaskStore": "chongming.stores.base",
    "InMemoryTaskStore": "chongming.stores.memory",
    "SqliteTaskStore": "chongming.stores.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
