"""Task stores: the port and its backends (PostgreSQL is imported lazily)."""

from chongming.stores.base import Command as Command
from chongming.stores.base import CommandKind as CommandKind
from chongming.stores.base import TaskStore as TaskStore
from chongming.stores.memory import InMemoryTaskStore as InMemoryTaskStore
from chongming.stores.sqlite import SqliteTaskStore as SqliteTaskStore
