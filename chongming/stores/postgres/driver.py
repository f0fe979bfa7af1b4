"""The one boundary between asyncpg and chongming.

``load_asyncpg`` is the only import of the driver (so importing chongming
never needs it), and :func:`translate` is the only place where a driver
exception becomes a :class:`~chongming.errors.StoreError`. Driver messages
can quote the DSN, so every message is scrubbed of the password and the
original exception is never chained (``raise ... from None``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import NoReturn

from chongming.errors import (
    ConfigurationError,
    SchemaError,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreUnavailable,
)

__all__ = ["is_connection_error", "load_asyncpg", "translate", "translating"]

INSTALL_HINT = 'pip install "chongming[postgres]"'

# SQLSTATE classes and codes, from the PostgreSQL manual, appendix A.
_CONNECTION_STATES = frozenset({"57P01", "57P02", "57P03", "57P05", "53300"})
_BUSY_STATES = frozenset({"40001", "40P01", "55P03", "57014"})
_FULL_STATES = frozenset({"53100"})
_SCHEMA_STATES = frozenset({"42P01", "3F000", "42703"})
_CLOSED_PHRASES = ("connection is closed", "connection was closed", "pool is closing")


def load_asyncpg() -> ModuleType:
    """Import asyncpg, or say exactly what to install."""
    try:
        import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
    except ImportError:
        raise ConfigurationError(
            f"PostgresTaskStore needs the asyncpg driver: {INSTALL_HINT}"
        ) from None
    return asyncpg  # type: ignore[no-any-return]  # a module object, typed Any by the ignore above


def sqlstate(error: BaseException) -> str | None:
    state = getattr(error, "sqlstate", None)
    return state if isinstance(state, str) else None


def is_connection_error(error: BaseException) -> bool:
    """True when the connection (not the statement) failed: the outcome is unknown."""
    if isinstance(error, (OSError, asyncio.TimeoutError, EOFError)):
        return True
    state = sqlstate(error)
    if state is not None:
        return state.startswith("08") or state in _CONNECTION_STATES
    name = type(error).__name__
    if name in ("ConnectionDoesNotExistError", "ConnectionFailureError"):
        return True
    if name in ("InternalClientError", "ProtocolError"):
        # The protocol state is broken (seen after pg_terminate_backend of an idle
        # connection): nothing was sent, and the connection must be discarded.
        return True
    if name == "InterfaceError" or name.endswith("InterfaceError"):
        text = str(error).lower()
        return any(phrase in text for phrase in _CLOSED_PHRASES)
    return False


def translate(error: BaseException, what: str, scrubber: Callable[[str], str]) -> StoreError:
    """The chongming error for a driver (or socket) error raised while doing ``what``."""
    detail = scrubber(_describe(error))
    state = sqlstate(error)
    if is_connection_error(error):
        return StoreUnavailable(f"{what}: PostgreSQL is unreachable ({detail})")
    if state in _FULL_STATES:
        return StoreFull(f"{what}: the database disk is full ({detail})")
    if state in _BUSY_STATES:
        return StoreBusy(f"{what}: the database is busy ({detail})")
    if state in _SCHEMA_STATES:
        return SchemaError(f"{what}: the chongming schema is missing or damaged ({detail})")
    if state == "42501":
        return StoreError(f"{what}: permission denied for this role ({detail})")
    if state is not None and state.startswith("28"):
        return StoreUnavailable(f"{what}: authentication failed ({detail})")
    if state == "3D000":
        return StoreUnavailable(f"{what}: the database does not exist ({detail})")
    if state is not None and state.startswith("53"):
        return StoreUnavailable(f"{what}: the server is out of resources ({detail})")
    return StoreError(f"{what}: {detail}")


@contextlib.contextmanager
def translating(what: str, scrubber: Callable[[str], str]) -> Iterator[None]:
    """Map anything the driver raises inside the block; chongming errors pass through."""
    try:
        yield
    except StoreError:
        raise
    except ConfigurationError:
        raise
    except Exception as error:
        raise_translated(error, what, scrubber)


def raise_translated(error: BaseException, what: str, scrubber: Callable[[str], str]) -> NoReturn:
    raise translate(error, what, scrubber) from None


def _describe(error: BaseException) -> str:
    state = sqlstate(error)
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    if state:
        return f"{name} [{state}]: {text}" if text else f"{name} [{state}]"
    return f"{name}: {text}" if text else name
