"""The store's pooled connections know the builtin array types: no catalog look-up per type.

asyncpg looks up each array type a statement uses once per connection, with a
catalog query that is heavy for the server; the store's pool registers the
builtin ones (:func:`chongming.stores.postgres.rows.known_arrays`) instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from chongming.state.status import TaskStatus
from chongming.testing.store_contract import next_step
from tests.stores.pg_support import PgStoreFactory, require_postgres
from tests.stores.test_postgres_enqueue_batches import _queued

pytestmark = pytest.mark.postgres


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


async def test_the_hot_statements_need_no_type_look_up(
    factory: PgStoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asyncpg import connection  # type: ignore[import-untyped]

    looked_up: list[Any] = []
    introspect = connection.Connection._introspect_types

    async def spy(self: Any, types: Any, timeout: Any) -> Any:
        looked_up.append(sorted(types))
        return await introspect(self, types, timeout)

    monkeypatch.setattr(connection.Connection, "_introspect_types", spy)
    store = factory.make()
    async with store:
        items = [_queued(f"t-{n}", args=(n,)) for n in range(20)]
        await store.enqueue_many([(snapshot, [step]) for snapshot, step in items])
        at = datetime.now(UTC)
        claimed = await store.claim_started("node", serves={"job": [None]}, limit=20, at=at)
        assert len(claimed) == 20
        for task in claimed:
            running, step = next_step(task.snapshot, TaskStatus.RUNNING)
            await store.save(
                running, expect_version=task.snapshot.status_version, transitions=[step]
            )
        assert len(await store.histories([t.snapshot.task_id for t in claimed])) == 20
    assert looked_up == []
