"""Task stores: the port and its backends.

Importing this package imports no backend and no driver: the names below are
resolved on first use (module ``__getattr__``), so a controller without a
store never pays for SQLite's or PostgreSQL's modules, nor for aiosqlite or
asyncpg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming.exports import lazy_exports as _lazy_exports

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

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals())
