"""The task indexes on PostgreSQL (migration 0010): what a state change costs, what queries use.

Every state change writes ``status``, so it is never a HOT update: it adds an
entry to every index whose predicate holds for the new row. The bucket and
tag indexes hold only rows that have one, and the store's filters imply as
much, so those indexes still serve every bucket and tag query.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chongming.state.query import TaskQuery
from chongming.state.status import TaskStatus
from chongming.testing.store_contract import make_snapshot
from tests.stores.pg_support import PgStoreFactory, admin_connection, require_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


async def _plan(conn: Any, sql: str, args: list[object]) -> str:
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        rows = await conn.fetch("EXPLAIN " + sql, *args)
    return "\n".join(row[0] for row in rows)


async def test_bucket_tag_and_status_filters_use_their_indexes(factory: PgStoreFactory) -> None:
    store = factory.make()
    async with store:
        plain = make_snapshot("plain")
        tagged = dataclasses.replace(make_snapshot("tagged"), tags=frozenset({"gpu"}), bucket=3)
        for snapshot in (plain, tagged):
            await store.create(snapshot)
        assert [s.task_id for s in await store.query(TaskQuery(tag="gpu"))] == ["tagged"]
        assert [s.task_id for s in await store.query(TaskQuery(bucket=3))] == ["tagged"]
        assert [s.task_id for s in await store.query(TaskQuery(buckets=frozenset({3, 4})))] == [
            "tagged"
        ]
        assert await store.query(TaskQuery(bucket=4)) == []
        statements = store._sql  # the store's own statements, planned generically
        async with admin_connection() as conn:
            for query, index in (
                (TaskQuery(tag="gpu"), "tasks_tags_idx"),
                (TaskQuery(bucket=3), "tasks_bucket_idx"),
                (TaskQuery(buckets=frozenset({3, 4})), "tasks_bucket_idx"),
                (TaskQuery(statuses=frozenset({TaskStatus.RUNNING})), "tasks_counts_idx"),
            ):
                assert index in await _plan(conn, *statements.query(query)), query
            for index, predicate in (
                ("tasks_bucket_idx", "(bucket IS NOT NULL)"),
                ("tasks_tags_idx", "(tags <> '{}'::text[])"),
            ):
                found = await conn.fetchval(
                    "SELECT pg_get_expr(indpred, indrelid) FROM pg_index"
                    " WHERE indexrelid = $1::regclass",
                    f'"{store.schema}".{index}',
                )
                assert found == predicate  # a task without bucket or tags: no entry
