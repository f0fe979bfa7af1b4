"""PostgreSQL-only behaviour: schema bootstrap, roles, NOTIFY hints, the listener, retries."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime

import pytest

from chongming.errors import PayloadError, SchemaError, StoreError
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.nodes import Command, CommandKind
from chongming.stores.postgres import PostgresTaskStore
from chongming.stores.postgres.schema import SCHEMA_VERSION
from chongming.testing.store_contract import make_snapshot, next_step
from tests.stores.pg_support import (
    PgStoreFactory,
    admin_connection,
    backend_pids,
    fresh_name,
    require_postgres,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


def _command(command_id: str, task_id: str = "t") -> Command:
    return Command(
        command_id=command_id, task_id=task_id, kind=CommandKind.STOP, created_at=datetime.now(UTC)
    )


async def _bounded(awaitable: Awaitable[object], timeout: float = 5.0) -> object:
    return await asyncio.wait_for(awaitable, timeout)


async def _still_waiting(waiter: asyncio.Task[None]) -> None:
    """Give ``waiter`` the loop turns it needs to park on its event, then check it did.

    A count of turns, not a sleep: a waiter that would return at once (nothing
    to wait for) is done by then, whatever the machine's load.
    """
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiter.done(), "the waiter returned although nothing was sent"


# -- schema ------------------------------------------------------------------


async def test_tables_indexes_and_version_are_created(factory: PgStoreFactory) -> None:
    store = factory.make()
    await store.open()
    async with admin_connection() as conn:
        tables = {
            row["tablename"]
            for row in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = $1", store.schema
            )
        }
        indexes = {
            row["indexname"]
            for row in await conn.fetch(
                "SELECT indexname FROM pg_indexes WHERE schemaname = $1", store.schema
            )
        }
        kinds = dict(
            await conn.fetch(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = $1 AND table_name = 'tasks'",
                store.schema,
            )
        )
        version = await conn.fetchval(f'SELECT max(version) FROM "{store.schema}".schema_version')
    assert tables == {
        "tasks",
        "transitions",
        "commands",
        "nodes",
        "schema_version",
        "idempotency_keys",
        "cluster_limits",
        "cluster_slots",
        "durable_runs",
        "durable_steps",
        "durable_facts",
        "durable_effects",
        "trace_carriers",
        "rate_limits",
        "rate_grants",
        "schedules",
    }
    assert {"tasks_bucket_idx", "tasks_owner_idx", "tasks_name_idx"} <= indexes
    assert "tasks_status_idx" not in indexes  # tasks_counts_idx leads with status (0010)
    assert {"tasks_counts_idx", "commands_created_idx", "commands_task_created_idx"} <= indexes
    assert {"tasks_claimable_idx", "idempotency_keys_task_idx"} <= indexes
    assert "tasks_lease_idx" not in indexes
    assert "lease_owner" not in kinds
    for column in ("args", "kwargs", "result", "progress", "failure"):
        assert kinds[column] == "jsonb", column
    assert kinds["created_at"] == "timestamp with time zone"
    assert "tasks_finished_idx" in indexes  # retention's pick (*_retention)
    assert version == SCHEMA_VERSION  # the last migration (numbered 1..n, no gap)


async def test_concurrent_first_connects_all_succeed(factory: PgStoreFactory) -> None:
    schema = fresh_name("s")
    stores = [factory.make(schema=schema, max_size=1) for _ in range(6)]
    await _bounded(asyncio.gather(*(store.open() for store in stores)), 30)
    await stores[0].create(make_snapshot("t"))
    assert await stores[5].get("t") is not None
    async with admin_connection() as conn:
        rows = await conn.fetchval(f'SELECT count(*) FROM "{schema}".schema_version')
    assert rows == SCHEMA_VERSION  # each migration recorded once


async def test_a_newer_schema_version_is_refused(factory: PgStoreFactory) -> None:
    schema = fresh_name("s")
    await factory.make(schema=schema).open()
    async with admin_connection() as conn:
        await conn.execute(f'INSERT INTO "{schema}".schema_version (version) VALUES (999)')
    newer = factory.make(schema=schema)
    with pytest.raises(SchemaError, match="version 999, newer than"):
        await newer.open()


async def test_settings_are_durable_and_connections_named(factory: PgStoreFactory) -> None:
    store = factory.make()
    await store.open()
    pids = await backend_pids(factory.application_name)
    assert pids, "the pool's connections carry the application_name"
    async with admin_connection() as conn:
        setting = await conn.fetchval(
            "SELECT setting FROM pg_settings WHERE name = 'synchronous_commit'"
        )
    assert setting == "on"


# -- roles without DDL rights ------------------------------------------------


@pytest.fixture
async def restricted_role(factory: PgStoreFactory) -> AsyncIterator[tuple[str, str]]:
    """(schema, role): a schema created by the admin, and a role with no DDL rights."""
    schema = fresh_name("s")
    owner = factory.make(schema=schema)
    await owner.create(make_snapshot("existing"))
    role = fresh_name("r")
    async with admin_connection() as conn:
        await conn.execute(f'CREATE ROLE "{role}" LOGIN')
        await conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        await conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    try:
        yield schema, role
    finally:
        for store in factory.stores:
            await store.close()
        async with admin_connection() as conn:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
            )
            await conn.execute(f'DROP OWNED BY "{role}"')
            await conn.execute(f'DROP ROLE "{role}"')


def _dsn_for(role: str) -> str:
    base = require_postgres()
    scheme, rest = base.split("://", 1)
    return f"{scheme}://{role}@{rest.split('@', 1)[1]}"


async def test_read_only_role_reads_without_ddl(
    factory: PgStoreFactory, restricted_role: tuple[str, str]
) -> None:
    schema, role = restricted_role
    store = PostgresTaskStore(
        _dsn_for(role), schema=schema, application_name=factory.application_name
    )
    factory.stores.append(store)
    await store.open()
    assert store.read_only
    assert (await store.get("existing")) is not None
    assert [s.task_id for s in await store.query(TaskQuery())] == ["existing"]
    assert await store.history("existing") == []
    with pytest.raises(StoreError, match="may only read"):
        await store.create(make_snapshot("new"))
    with pytest.raises(StoreError, match="may only read"):
        await store.submit_command(_command("c"))


async def test_dml_role_without_ddl_rights_reads_and_writes(
    factory: PgStoreFactory, restricted_role: tuple[str, str]
) -> None:
    schema, role = restricted_role
    async with admin_connection() as conn:
        await conn.execute(f'GRANT INSERT, UPDATE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    store = PostgresTaskStore(
        _dsn_for(role), schema=schema, application_name=factory.application_name
    )
    factory.stores.append(store)
    await store.open()
    assert not store.read_only
    await store.create(make_snapshot("new"))
    await store.submit_command(_command("c"))
    assert [c.command_id for c in await store.claim_commands("n", lease_seconds=5)] == ["c"]


async def test_role_without_ddl_rights_and_no_schema_gets_a_clear_error(
    factory: PgStoreFactory, restricted_role: tuple[str, str]
) -> None:
    _, role = restricted_role
    store = PostgresTaskStore(
        _dsn_for(role), schema=fresh_name("missing"), application_name=factory.application_name
    )
    factory.stores.append(store)
    with pytest.raises(SchemaError, match="no right to create it"):
        await store.open()


# -- NOTIFY hints and the listener ---------------------------------------------


async def test_notify_payload_carries_only_ids_and_stays_small(factory: PgStoreFactory) -> None:
    store = factory.make()
    await store.open()
    received: list[str] = []
    got = asyncio.Event()
    async with admin_connection() as conn:

        def on_notify(*args: object) -> None:
            received.append(str(args[3]))
            got.set()

        await conn.add_listener(f"chongming:{store.schema}", on_notify)
        command = Command(
            command_id="c-1",
            task_id="t-1",
            kind=CommandKind.PAUSE,
            created_at=datetime.now(UTC),
            reason="secret reason " * 1000,
            actor="someone",
        )
        await store.submit_command(command)
        await _bounded(got.wait())
        got.clear()
        await store.submit_command(_command("x" * 9000, "t-2"))  # an id too big for a payload
        await _bounded(got.wait())
        await conn.remove_listener(f"chongming:{store.schema}", on_notify)
    assert json.loads(received[0]) == {"command_id": "c-1", "task_id": "t-1"}
    assert len(received[1].encode()) < 8000
    assert set(json.loads(received[1])) <= {"command_id", "task_id"}


async def test_a_submitted_command_wakes_a_waiting_poller(factory: PgStoreFactory) -> None:
    schema = fresh_name("s")
    poller = factory.make(schema=schema)
    sender = factory.make(schema=schema)
    await _bounded(poller.wait_command_hint())  # the first call returns once LISTEN is in place
    waiter = asyncio.create_task(poller.wait_command_hint())
    await _still_waiting(waiter)  # nothing was submitted yet
    await sender.submit_command(_command("c"))
    await _bounded(waiter)
    assert [c.command_id for c in await poller.claim_commands("n", lease_seconds=5)] == ["c"]


async def _listener_pid(application_name: str) -> int:
    async with admin_connection() as conn:
        pid = await conn.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            application_name,
        )
    assert pid is not None, "no LISTEN session found"
    return int(pid)


async def test_a_terminated_listener_reconnects_and_wakes_the_poller(
    factory: PgStoreFactory,
) -> None:
    schema = fresh_name("s")
    poller = factory.make(schema=schema)
    sender = factory.make(schema=schema)
    await _bounded(poller.wait_command_hint())
    waiter = asyncio.create_task(poller.wait_command_hint())
    await _still_waiting(waiter)
    old = await _listener_pid(factory.application_name)
    async with admin_connection() as conn:
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", old)
    # The lost session wakes the waiter once LISTEN is back, so its poll misses nothing.
    await _bounded(waiter)
    assert poller.statistics().listener_reconnects == 1
    new = await _listener_pid(factory.application_name)
    assert new != old
    # Notifications flow again on the new session.
    waiter = asyncio.create_task(poller.wait_command_hint())
    await _still_waiting(waiter)
    await sender.submit_command(_command("after"))
    await _bounded(waiter)


# -- reconnects -----------------------------------------------------------------


async def test_reads_and_writes_survive_terminated_pool_connections(
    factory: PgStoreFactory,
) -> None:
    store = factory.make(min_size=2, max_size=2)
    await store.create(make_snapshot("t"))
    async with admin_connection() as conn:
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = $1",
            factory.application_name,
        )
    assert killed >= 1
    assert await store.get("t") is not None
    await store.create(make_snapshot("u"))
    assert [s.task_id for s in await store.query(TaskQuery())] == ["t", "u"]


async def test_a_pool_passed_in_is_used_and_left_open(factory: PgStoreFactory) -> None:
    import asyncpg  # type: ignore[import-untyped]

    schema = fresh_name("s")
    factory.schemas.append(schema)
    pool = await asyncpg.create_pool(
        factory.dsn,
        min_size=1,
        max_size=3,
        server_settings={"application_name": factory.application_name},
    )
    try:
        store = PostgresTaskStore(pool, schema=schema)
        assert "caller's pool" in repr(store)
        await store.create(make_snapshot("t"))
        await _bounded(store.wait_command_hint())  # borrows a pool connection to LISTEN
        waiter = asyncio.create_task(store.wait_command_hint())
        await _still_waiting(waiter)
        await store.submit_command(_command("c"))
        await _bounded(waiter)
        await store.close()
        async with pool.acquire() as conn:  # still open, every connection handed back
            assert await conn.fetchval(f'SELECT count(*) FROM "{schema}".tasks') == 1
        assert pool.get_size() - pool.get_idle_size() == 0
    finally:
        await pool.close()


async def test_close_wakes_a_waiting_poller_with_store_closed(factory: PgStoreFactory) -> None:
    from chongming.errors import StoreClosed

    store = factory.make()
    await _bounded(store.wait_command_hint())
    waiter = asyncio.create_task(store.wait_command_hint())
    await _still_waiting(waiter)
    await store.close()
    with pytest.raises(StoreClosed):
        await _bounded(waiter)


async def test_a_version_1_schema_migrates_keeping_its_tasks(factory: PgStoreFactory) -> None:
    from chongming.stores.postgres.schema import MIGRATIONS

    schema = fresh_name("s")
    factory.schemas.append(schema)
    async with admin_connection() as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(
            f'CREATE TABLE "{schema}".schema_version (version integer PRIMARY KEY,'
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.execute(MIGRATIONS[0][1].replace("@schema", f'"{schema}"'))
        await conn.execute(f'INSERT INTO "{schema}".schema_version (version) VALUES (1)')
    old = factory.make(schema=schema)
    await old.open()
    await old.create(make_snapshot("t"))
    await old.close()
    async with admin_connection() as conn:  # back to version 1, with a task leased the old way
        await conn.execute(f'DELETE FROM "{schema}".schema_version WHERE version > 1')
        await conn.execute(f'DROP TABLE "{schema}".nodes')
        await conn.execute(
            f'ALTER TABLE "{schema}".tasks ADD COLUMN lease_owner text,'
            " ADD COLUMN lease_expires_at timestamptz"
        )
        await conn.execute(f'ALTER TABLE "{schema}".commands DROP COLUMN outcome')
        await conn.execute(f"UPDATE \"{schema}\".tasks SET lease_owner = 'old-node'")
    store = factory.make(schema=schema)
    await store.open()
    assert await store.get("t") == make_snapshot("t")
    assert await store.nodes() == []
    async with admin_connection() as conn:
        version = await conn.fetchval(f'SELECT max(version) FROM "{schema}".schema_version')
        columns = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1"
            " AND table_name = 'tasks' AND column_name LIKE 'lease%'",
            schema,
        )
    assert (version, columns) == (SCHEMA_VERSION, 0)


async def test_a_role_granted_before_the_carrier_table_enqueues_untraced(
    factory: PgStoreFactory,
    restricted_role: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rights given table by table before migration 0008: a traced enqueue still lands."""
    schema, role = restricted_role
    async with admin_connection() as conn:
        await conn.execute(f'GRANT INSERT, UPDATE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        await conn.execute(f'REVOKE INSERT, UPDATE ON "{schema}".trace_carriers FROM "{role}"')
    store = PostgresTaskStore(
        _dsn_for(role), schema=schema, application_name=factory.application_name
    )
    factory.stores.append(store)
    carrier = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    with caplog.at_level(logging.WARNING, logger="chongming.stores.postgres"):
        enqueued = await store.enqueue(*_queued("q-1"), trace_carrier=carrier)
        await store.enqueue(*_queued("q-2"), trace_carrier=carrier)
    assert enqueued.created
    assert (await store.get("q-1")) is not None
    assert (await store.get("q-2")) is not None
    assert await store.trace_carriers(["q-1", "q-2"]) == {}
    warned = [r for r in caplog.records if "trace_carriers" in r.getMessage()]
    assert len(warned) == 1  # said once, not per enqueue
    with pytest.raises(PayloadError):  # a bad carrier is still refused, untraced or not
        await store.enqueue(*_queued("q-3"), trace_carrier={"traceparent": 7})  # type: ignore[dict-item]


def _queued(task_id: str) -> tuple[TaskSnapshot, list[Transition]]:
    """A task as enqueue writes it: queued, nobody's, with its first transition."""
    queued, step = next_step(make_snapshot(task_id), TaskStatus.QUEUED, trigger="test:enqueue")
    return dataclasses.replace(queued, queued_at=queued.updated_at), [step]
