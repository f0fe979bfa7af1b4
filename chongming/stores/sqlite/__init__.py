"""The SQLite store: schema and migrations, the group-commit writer, the store."""

from chongming.stores.sqlite.store import SqliteTaskStore as SqliteTaskStore

__all__ = ["SqliteTaskStore"]
