"""SQLite: cheap command polling (PRAGMA data_version), the guarded node clock, migration 0002."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chongming.stores.nodes import Command, CommandKind, NodeInfo
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.sqlite.schema import LATEST_VERSION, MIGRATIONS


def _command(command_id: str) -> Command:
    return Command(
        command_id=command_id, task_id="t", kind=CommandKind.STOP, created_at=datetime.now(UTC)
    )


async def test_an_idle_poll_skips_the_claim_and_another_stores_submit_is_still_claimed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    async with SqliteTaskStore(path) as poller, SqliteTaskStore(path) as other:
        assert await poller.claim_commands("node-a", lease_seconds=30) == []
        writes_before = poller._writer.batches if poller._writer else 0
        for _ in range(5):
            assert await poller.claim_commands("node-a", lease_seconds=30) == []
        assert poller.claims_skipped == 5
        assert (poller._writer.batches if poller._writer else 0) == writes_before, (
            "a skipped poll runs no transaction"
        )
        await other.submit_command(_command("from-other"))
        claimed = await poller.claim_commands("node-a", lease_seconds=30)
        assert [c.command_id for c in claimed] == ["from-other"]


async def test_a_submit_through_the_pollers_own_writer_is_claimed_on_memory() -> None:
    # ":memory:" has one connection: data_version never moves, only the writer's count does.
    async with SqliteTaskStore(":memory:") as store:
        assert await store.claim_commands("node-a", lease_seconds=30) == []
        assert await store.claim_commands("node-a", lease_seconds=30) == []
        assert store.claims_skipped == 1
        await store.submit_command(_command("own"))
        assert [c.command_id for c in await store.claim_commands("node-a", lease_seconds=30)] == [
            "own"
        ]


async def test_a_poll_cut_by_its_limit_looks_again(tmp_path: Path) -> None:
    async with SqliteTaskStore(tmp_path / "tasks.db") as store:
        for i in range(3):
            await store.submit_command(_command(f"c{i}"))
        assert len(await store.claim_commands("node-a", lease_seconds=30, limit=2)) == 2
        assert len(await store.claim_commands("node-a", lease_seconds=30, limit=2)) == 1


async def test_a_clock_step_back_in_another_process_cannot_resurrect_a_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tasks.db"
    info = NodeInfo(owner="n", incarnation="i", host="h", pid=1, version="1", num_buckets=4)
    async with SqliteTaskStore(path) as judge:
        await judge.register_node(info, ttl_seconds=0.05)
        # Judged expired once (by the real clock, a little later; a bounded poll)...
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while (await judge.nodes())[0].live:
            assert loop.time() < deadline, "the node lease never expired"
            await asyncio.sleep(0.01)
    # ...then a fresh process whose wall clock stepped back an hour judges it still expired.
    real = __import__("time").time_ns
    monkeypatch.setattr("chongming.stores.sqlite.store.time.time_ns", lambda: real() - 3600 * 10**9)
    async with SqliteTaskStore(path) as late:
        (record,) = await late.nodes()
        assert not record.live


def _apply_0001(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        for statement in MIGRATIONS[0].statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (1, 'initial', 0)")
    finally:
        conn.close()


async def test_a_version_1_file_migrates_keeping_its_tasks_and_dropping_task_leases(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    path.touch(mode=0o600)
    _apply_0001(path)  # a file written by the previous chongming, holding one task
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "INSERT INTO tasks (task_id, name, label, status, status_version, attempt, max_attempts,"
        " tags, priority, created_at, updated_at, result, args, kwargs, lease_owner,"
        " lease_expires_at) VALUES ('t', 'extract', 'label of t', 'pending', 0, 0, 3, '[]', 0,"
        " ?, ?, 'null', '[]', '{}', 'old-node', 1)",
        (1_791_000_000_123_456, 1_791_000_000_123_456),
    )
    conn.close()
    async with SqliteTaskStore(path) as store:
        stored = await store.get("t")
        assert stored is not None
        assert stored.task_id == "t"
        assert stored.label == "label of t"
        assert await store.task_counts()
    conn = sqlite3.connect(path)
    try:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(tasks)")]
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert versions == list(range(1, LATEST_VERSION + 1))
    assert "lease_owner" not in columns
    assert {"nodes", "store_clock", "tasks_by_status_bucket_owner", "tasks_by_owner"} <= indexes
