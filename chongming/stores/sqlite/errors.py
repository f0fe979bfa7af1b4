"""Translation of sqlite3 errors into the store's own tree, at one boundary."""

from __future__ import annotations

import sqlite3

from chongming.errors import SchemaError, StoreBusy, StoreError, StoreFull, StoreUnavailable

__all__ = ["translate"]

# Primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low byte.
_PERM = 3
_BUSY = 5
_LOCKED = 6
_READONLY = 8
_IOERR = 10
_CORRUPT = 11
_FULL = 13
_CANTOPEN = 14
_NOTADB = 26


def translate(error: sqlite3.Error, *, where: str, busy_timeout: float) -> StoreError:
    """The :class:`StoreError` a caller sees for ``error`` raised while working on ``where``."""
    code = getattr(error, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    detail = str(error)
    if primary in (_BUSY, _LOCKED):
        return StoreBusy(
            f"{where}: still locked by another connection after the busy timeout "
            f"of {busy_timeout:g} s ({detail}); nothing was written"
        )
    if primary == _FULL:
        return StoreFull(
            f"{where}: the disk or the database size limit is full ({detail}); "
            "the transaction was rolled back"
        )
    if primary in (_READONLY, _PERM):
        return StoreUnavailable(f"{where}: the database is read-only for this process ({detail})")
    if primary == _CANTOPEN:
        return StoreUnavailable(f"{where}: the database file cannot be opened ({detail})")
    if primary == _NOTADB:
        return StoreUnavailable(f"{where}: the file is not a SQLite database ({detail})")
    if primary == _CORRUPT:
        return SchemaError(f"{where}: the database is damaged ({detail})")
    if primary == _IOERR:
        return StoreUnavailable(f"{where}: I/O error ({detail})")
    return StoreError(f"{where}: {type(error).__name__}: {detail}")
