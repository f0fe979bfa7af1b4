"""Creating the database file before SQLite does (blocking; run in a thread)."""

from __future__ import annotations

import errno
import os

from chongming.errors import StoreUnavailable

__all__ = ["prepare_database_file"]


def prepare_database_file(path: str) -> None:
    """Create ``path`` with mode 0600 unless it exists; explain why it cannot be created.

    SQLite would create the file with 0644 under the usual umask; creating it
    first makes the database private, and SQLite gives the ``-wal`` and
    ``-shm`` files the same mode as the database.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        if os.path.isdir(path):
            raise StoreUnavailable(
                f"cannot use {path!r} as a SQLite database: it is a directory"
            ) from None
        return
    except OSError as error:
        directory = os.path.dirname(os.path.abspath(path))
        if error.errno == errno.ENOENT:
            reason = f"the directory {directory!r} does not exist"
        elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            reason = f"the location {directory!r} is read-only for this process"
        else:
            reason = error.strerror or str(error)
        raise StoreUnavailable(f"cannot create SQLite database {path!r}: {reason}") from None
    try:
        os.fchmod(fd, 0o600)  # the umask may have removed bits we want; never add any
    finally:
        os.close(fd)
