"""One resolver from a location string to a store, shared by the controller and the CLI.

- ``postgresql://…`` or ``postgres://…`` (or a libpq keyword string starting
  with ``host=``/``dbname=``…) → :class:`PostgresTaskStore`;
- ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:``
  or a plain path → :class:`SqliteTaskStore`;
- ``memory:`` → :class:`InMemoryTaskStore` (one process only).

The store is returned unopened; it connects on first use. A DSN's password
never appears in an error message.
"""

from __future__ import annotations

import os
import re

from chongming.errors import ConfigurationError
from chongming.stores.base import TaskStore

__all__ = ["describe_location", "open_store"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_KEYWORD_DSN = re.compile(r"^\s*(host|hostaddr|dbname|user|port|service)\s*=")


def open_store(location: str | os.PathLike[str]) -> TaskStore:
    """The store a location names (see the module docstring), not yet opened."""
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str):
        raise ConfigurationError(
            f"a store location is a path or a URL string, got {type(location).__name__}"
        )
    if not location.strip():
        raise ConfigurationError("the store location is empty")
    if "\x00" in location:
        raise ConfigurationError("the store location contains a NUL character")
    match = _SCHEME.match(location)
    scheme = match.group(1).lower() if match else None
    if scheme in ("postgresql", "postgres") or (scheme is None and _KEYWORD_DSN.match(location)):
        from chongming.stores.postgres import PostgresTaskStore

        return PostgresTaskStore(location)
    if scheme == "sqlite":
        path = location[len("sqlite://") :]
        if not path.startswith("/") or path == "/":
            raise ConfigurationError(
                "a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        from chongming.stores.sqlite import SqliteTaskStore

        return SqliteTaskStore(path[1:])
    if scheme is not None:
        raise ConfigurationError(
            f"unknown store scheme {scheme!r}: use a path, sqlite:///path or postgresql://…"
        )
    if location == "memory:":
        from chongming.stores.memory import InMemoryTaskStore

        return InMemoryTaskStore()
    from chongming.stores.sqlite import SqliteTaskStore

    return SqliteTaskStore(location)


def describe_location(location: str | os.PathLike[str]) -> str:
    """The location as it may be printed: a DSN's password is redacted."""
    text = os.fspath(location) if isinstance(location, os.PathLike) else str(location)
    match = _SCHEME.match(text)
    scheme = match.group(1).lower() if match else None
    if scheme in ("postgresql", "postgres") or (scheme is None and _KEYWORD_DSN.match(text)):
        from chongming.stores.postgres.dsn import redact_dsn

        return redact_dsn(text)
    return text
