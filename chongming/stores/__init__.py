"""Task stores: the port and its backends (PostgreSQL is imported lazily)."""

from chongming.stores.base import Command as Command
from chongming.stores.base import CommandKind as CommandKind
from chongming.stores.base import ExpiredLease as ExpiredLease
from chongming.stores.base import TaskStore as TaskStore
