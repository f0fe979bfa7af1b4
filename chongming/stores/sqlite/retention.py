"""Retention on SQLite: each batch one short write transaction through the store's writer.

A prune batch is a writer action (:data:`ACTIONS`), so it runs inside the
writer's ``BEGIN IMMEDIATE`` like any other write: it never races a claim
(SQLite has one writer at a time), and it is held for one batch of at most
``limit`` tasks, so a claim queued behind it waits for that batch only. The
pick uses the partial index of finished tasks (migration ``*_retention``), so
a batch costs its own rows, not a scan of the table.

Space: SQLite keeps a deleted page on the file's free list and reuses it for
new rows, so a store under steady retention stops growing; the file does not
shrink. A database the operator switched to ``PRAGMA auto_vacuum =
INCREMENTAL`` (it needs a ``VACUUM`` once) also gives up to
:data:`VACUUM_PAGES` free pages back to the file system after each batch.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from chongming.state.status import TERMINAL_STATUSES
from chongming.stores.codec import dump
from chongming.stores.ports.retention import RetentionStore
from chongming.stores.retention import TASK_TABLES, PruneSelection, check_batch, check_selection
from chongming.stores.sqlite.internals import SqliteInternals
from chongming.stores.sqlite.rows import to_micros

__all__ = ["ACTIONS", "RetentionOnSqlite", "run_action"]

#: The writer actions this module answers.
ACTIONS = frozenset({"prune_tasks"})
#: Free pages one batch gives back when the database uses incremental auto-vacuum.
VACUUM_PAGES = 2000

_TERMINAL = ", ".join(f"'{status.value}'" for status in sorted(TERMINAL_STATUSES))
# The literal IN list lets the planner use the partial index (its predicate is the same list).
_WHERE = (
    f"status IN ({_TERMINAL}) AND finished_at < ?1"
    " AND status IN (SELECT value FROM json_each(?2))"
    " AND (?3 IS NULL OR name IN (SELECT value FROM json_each(?3)))"
    " AND name NOT IN (SELECT value FROM json_each(?4))"
    " AND (?5 IS NULL OR task_id IN (SELECT value FROM json_each(?5)))"
    # a parent stays while a child of its lives (the child's end is the parent's fact)
    " AND NOT EXISTS (SELECT 1 FROM tasks AS c WHERE c.parent_id = tasks.task_id"
    f" AND c.status NOT IN ({_TERMINAL}))"
)
_PICK = f"SELECT task_id FROM tasks WHERE {_WHERE} ORDER BY finished_at, task_id LIMIT ?6"
_COUNT = f"SELECT count(*) FROM tasks WHERE {_WHERE}"
_DELETES = tuple(
    f"DELETE FROM {table} WHERE task_id IN (SELECT value FROM json_each(?))"
    for table in (*TASK_TABLES, "tasks")
)
_INCREMENTAL = 2


def _params(selection: PruneSelection) -> tuple[Any, ...]:
    return (
        to_micros(selection.finished_before, "finished_before"),
        dump(sorted(selection.statuses)),
        None if selection.names is None else dump(sorted(selection.names)),
        dump(sorted(selection.exclude_names)),
        None if selection.task_ids is None else dump(sorted(selection.task_ids)),
    )


def run_action(conn: sqlite3.Connection, action: str, params: tuple[Any, ...], now: int) -> Any:
    if action == "prune_tasks":
        where, limit = params
        return _prune(conn, where, limit)
    raise TypeError(f"unknown retention action {action!r}")


def _prune(conn: sqlite3.Connection, where: tuple[Any, ...], limit: int) -> int:
    """One batch inside the writer's transaction (blocking: on the connection's thread)."""
    ids = [row[0] for row in conn.execute(_PICK, (*where, limit))]
    if not ids:
        return 0
    doomed = dump(ids)
    for delete in _DELETES:
        conn.execute(delete, (doomed,))
    (mode,) = conn.execute("PRAGMA auto_vacuum").fetchone()
    if mode == _INCREMENTAL:
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        # One page per call: the sqlite3 module steps a statement without result
        # columns once, and each step of incremental_vacuum gives back one page.
        for _ in range(min(int(free), VACUUM_PAGES)):
            conn.execute("PRAGMA incremental_vacuum(1)").close()
    return len(ids)


class RetentionOnSqlite(SqliteInternals, RetentionStore):
    """The store port's retention methods: a batch is one op in the writer's transaction."""

    async def prune_tasks(self, selection: PruneSelection, *, limit: int) -> int:
        where = _params(check_selection(selection))
        deleted: int = await self._node_op("prune_tasks", where, check_batch(limit, field="limit"))
        return deleted

    async def count_prunable(self, selection: PruneSelection) -> int:
        where = _params(check_selection(selection))
        rows = list(await self._read(_COUNT, where))
        return int(rows[0][0])
