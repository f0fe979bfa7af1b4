"""PostgreSQL task store (asyncpg; the optional ``chongming[postgres]`` extra).

Importing this package never needs asyncpg; constructing the store without it
raises :class:`~chongming.errors.ConfigurationError` naming the install command.
"""

from chongming.stores.postgres.dsn import redact_dsn as redact_dsn
from chongming.stores.postgres.store import PostgresStoreStatistics as PostgresStoreStatistics
from chongming.stores.postgres.store import PostgresTaskStore as PostgresTaskStore

__all__ = ["PostgresStoreStatistics", "PostgresTaskStore", "redact_dsn"]
