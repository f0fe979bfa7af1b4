"""Search on SQLite: the list query's filters plus label part, idempotency key, time range."""

from __future__ import annotations

from typing import Any

from chongming.errors import ConfigurationError
from chongming.state.records import TaskSnapshot
from chongming.stores.ports.search import SearchStore
from chongming.stores.search import TaskSearch
from chongming.stores.sqlite import rows as r
from chongming.stores.sqlite.internals import SqliteInternals

__all__ = ["SearchOnSqlite"]

_SELECT = f"SELECT {', '.join(r.TASK_NAMES)} FROM tasks"


def _where(search: TaskSearch) -> tuple[list[str], list[Any]]:
    query = search.query
    where: list[str] = []
    params: list[Any] = []

    def add(condition: str, value: Any) -> None:
        where.append(condition)
        params.append(value)

    if query.statuses is not None:
        statuses = r.dump(sorted(status.value for status in query.statuses))
        add("status IN (SELECT value FROM json_each(?))", statuses)
    if query.tag is not None:
        add("EXISTS (SELECT 1 FROM json_each(tasks.tags) AS t WHERE t.value = ?)", query.tag)
    if query.bucket is not None:
        add("bucket = ?", query.bucket)
    if query.buckets is not None:
        add("bucket IN (SELECT value FROM json_each(?))", r.dump(sorted(query.buckets)))
    if query.name is not None:
        add("name = ?", query.name)
    if query.owner is not None:
        add("owner = ?", query.owner)
    if search.idempotency_key is not None:
        # The key table's primary key finds the task; the task's own column says it still is.
        add(
            "task_id IN (SELECT task_id FROM idempotency_keys WHERE idempotency_key = ?)",
            search.idempotency_key,
        )
        add("idempotency_key = ?", search.idempotency_key)
    if search.created_from is not None:
        add("created_at >= ?", r.to_micros(search.created_from, "created_from"))
    if search.created_to is not None:
        add("created_at < ?", r.to_micros(search.created_to, "created_to"))
    if search.label is not None:
        add("instr(label, ?) > 0", search.label)  # no LIKE: % and _ are plain characters
    return where, params


class SearchOnSqlite(SqliteInternals, SearchStore):
    async def search_tasks(self, search: TaskSearch) -> list[TaskSnapshot]:
        if not isinstance(search, TaskSearch):
            raise ConfigurationError("search_tasks takes a TaskSearch")
        where, params = _where(search)
        sql = _SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, task_id"
        if search.query.limit is not None:
            sql += " LIMIT ?"
            params.append(search.query.limit)
        return [r.snapshot_from_row(row) for row in await self._read(sql, params)]
