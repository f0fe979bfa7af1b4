"""Search on PostgreSQL: the list query's SELECT with the search's conditions added."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from chongming.errors import ConfigurationError
from chongming.state.records import TaskSnapshot
from chongming.stores.postgres import rows
from chongming.stores.postgres.schema import quote_schema
from chongming.stores.postgres.sql import Statements
from chongming.stores.search import TaskSearch

__all__ = ["SearchMethods"]


class SearchMethods:
    """The store port's search method, on the statements of the list query."""

    _schema: str
    _sql: Statements

    async def _read(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
        raise NotImplementedError  # the store's: a pooled connection with bounded retries

    async def search_tasks(self, search: TaskSearch) -> list[TaskSnapshot]:
        if not isinstance(search, TaskSearch):
            raise ConfigurationError("search_tasks takes a TaskSearch")
        base, args = self._sql.query(dataclasses.replace(search.query, limit=None))
        select, order = base.split(" ORDER BY ", 1)
        where: list[str] = []

        def add(condition: str, value: object) -> None:
            args.append(value)
            where.append(condition.format(f"${len(args)}"))

        if search.idempotency_key is not None:
            keys = f"{quote_schema(self._schema)}.idempotency_keys"
            add(
                f"task_id IN (SELECT task_id FROM {keys} WHERE idempotency_key = {{}}::text)",
                search.idempotency_key,
            )
            add("idempotency_key = {}::text", search.idempotency_key)
        if search.created_from is not None:
            add("created_at >= {}", search.created_from)
        if search.created_to is not None:
            add("created_at < {}", search.created_to)
        if search.label is not None:
            add("strpos(label, {}::text) > 0", search.label)  # no LIKE: % and _ are plain
        sql = select
        if where:
            sql += (" AND " if " WHERE " in select else " WHERE ") + " AND ".join(where)
        sql += f" ORDER BY {order}"
        if search.query.limit is not None:
            args.append(search.query.limit)
            sql += f" LIMIT ${len(args)}"
        found = await self._read("searching tasks", lambda conn: conn.fetch(sql, *args))
        return [rows.snapshot_from_row(row) for row in found]
