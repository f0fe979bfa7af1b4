"""Node registration raced by real OS processes: exactly one wins, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from chongming.stores.base import TaskStore
from chongming.stores.sqlite import SqliteTaskStore
from tests.stores.pg_support import PgStoreFactory, fresh_name, require_postgres
from tests.stores.test_sqlite_processes import read_line, spawn

REGISTER_ONCE = """
import asyncio, os, sys
from chongming.errors import NodeConflict
from chongming.stores.nodes import NodeInfo

def make_store(kind, where, schema):
    if kind == "sqlite":
        from chongming.stores.sqlite import SqliteTaskStore
        return SqliteTaskStore(where, busy_timeout=10)
    from chongming.stores.postgres import PostgresTaskStore
    return PostgresTaskStore(where, schema=schema, application_name=sys.argv[5])

async def main(kind, where, schema, name):
    async with make_store(kind, where, schema) as store:
        await store.nodes()  # connected and migrated before the gun
        info = NodeInfo(owner="shared", incarnation=name, host="host-" + name,
                        pid=os.getpid(), version="1", num_buckets=8)
        print("ready", flush=True)
        sys.stdin.readline()  # the starting gun: everyone registers at once
        try:
            await store.register_node(info, ttl_seconds=60)
        except NodeConflict as conflict:
            print(f"conflict {conflict.host}", flush=True)
        else:
            print("won", flush=True)

asyncio.run(main(*sys.argv[1:5]))
"""

RACERS = 6


async def _race(kind: str, where: str, schema: str, app: str) -> tuple[str, list[str]]:
    names = [f"p{i}" for i in range(RACERS)]
    async with contextlib.AsyncExitStack() as stack:
        processes = [
            await stack.enter_async_context(spawn(REGISTER_ONCE, kind, where, schema, n, app))
            for n in names
        ]
        assert [await read_line(p) for p in processes] == ["ready"] * RACERS
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
        await asyncio.gather(*(p.stdin.drain() for p in processes if p.stdin is not None))
        outcomes = [await read_line(p) for p in processes]
    assert outcomes.count("won") == 1, outcomes
    winner = names[outcomes.index("won")]
    # Every loser was told who holds the name.
    assert sorted(o for o in outcomes if o != "won") == [f"conflict host-{winner}"] * (RACERS - 1)
    return winner, outcomes


async def _check_row(store: TaskStore, winner: str) -> None:
    (record,) = await store.nodes()
    assert (record.info.owner, record.info.incarnation) == ("shared", winner)
    assert record.info.host == f"host-{winner}"
    assert record.live


@pytest.mark.slow
async def test_processes_racing_for_one_owner_on_sqlite_have_one_winner(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    async with SqliteTaskStore(path) as store:
        await store.nodes()
    winner, _ = await _race("sqlite", str(path), "-", "-")
    async with SqliteTaskStore(path) as store:
        await _check_row(store, winner)


@pytest.mark.slow
@pytest.mark.postgres
async def test_processes_racing_for_one_owner_on_postgres_have_one_winner() -> None:
    factory = PgStoreFactory(require_postgres())
    try:
        schema = fresh_name("s")
        store = factory.make(schema=schema)
        await store.nodes()  # the schema exists before the racers connect
        winner, _ = await _race("postgres", factory.dsn, schema, factory.application_name)
        await _check_row(store, winner)
    finally:
        await factory.cleanup()
