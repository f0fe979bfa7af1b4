"""Numbered schema migrations for the SQLite store.

Migrations are the files ``chongming/stores/sql/sqlite_NNNN_<what>.sql``,
applied in order inside one ``BEGIN IMMEDIATE`` transaction, each recorded in
``schema_version``. The version is read first without any lock: a current
schema (the usual case) takes no write lock at all, so opening a store never
waits for, or fails on, another process's write. Two processes opening a
fresh file at once are safe: the second waits for the first one's
transaction, re-reads the version and finds nothing to do. A database
written by a newer chongming is refused before anything is written to it
(not even the WAL switch).

Blocking: these functions run on the connection's own thread.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from importlib import resources

from chongming.errors import SchemaError

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Migration", "migrate", "read_version"]

_FILE_NAME = re.compile(r"^sqlite_(\d{4})_(\w+)\.sql$")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def split_statements(script: str) -> tuple[str, ...]:
    """Split a script into complete statements (``executescript`` would commit midway)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        if not pending and (not line.strip() or line.lstrip().startswith("--")):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise SchemaError(f"incomplete SQL statement at the end of a migration: {pending!r}")
    return tuple(statements)


def _load() -> tuple[Migration, ...]:
    folder = resources.files("chongming.stores").joinpath("sql")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(
                Migration(
                    version=int(match.group(1)),
                    name=match.group(2),
                    statements=split_statements(entry.read_text(encoding="utf-8")),
                )
            )
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise SchemaError(f"SQLite migrations are not numbered 1..n: {[m.version for m in found]}")
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _load()
LATEST_VERSION: int = len(MIGRATIONS)

_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version INTEGER NOT NULL PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " applied_at INTEGER NOT NULL)"
)


def read_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration (0 for a new, empty database)."""
    rows = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchall()
    if not rows:
        return 0
    rows = conn.execute("SELECT max(version) FROM schema_version").fetchall()
    return int(rows[0][0] or 0)


def refuse_newer(version: int, where: str) -> None:
    if version > LATEST_VERSION:
        raise SchemaError(
            f"{where} was written by a newer chongming (schema version {version}; "
            f"this version understands up to {LATEST_VERSION}). Upgrade chongming to open it; "
            "the file was not modified."
        )


def migrate(conn: sqlite3.Connection, where: str, now_micros: int) -> int:
    """Bring the schema to :data:`LATEST_VERSION`; returns the version found before.

    Takes the write lock only when there is something to migrate.
    """
    found = read_version(conn)
    refuse_newer(found, where)
    if found == LATEST_VERSION:
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = read_version(conn)  # another process may have migrated meanwhile
        refuse_newer(found, where)
        if found < LATEST_VERSION:
            conn.execute(_VERSION_TABLE)
            for migration in MIGRATIONS[found:]:
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, now_micros),
                )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found
