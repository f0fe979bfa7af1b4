"""SQLite-only behaviour: files, schema versions, disk full, group commit, cancellation."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from chongming.errors import SchemaError, StoreClosed, StoreFull, StoreUnavailable, VersionConflict
from chongming.state.fold import fold_history
from chongming.state.records import Progress, TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.sqlite.connection import THREAD_PREFIX
from chongming.stores.sqlite.schema import LATEST_VERSION
from chongming.testing.store_contract import make_snapshot, next_step

_S = TaskStatus


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _connection_threads() -> int:
    """One thread per connection; a leaked one holds the file open."""
    return sum(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate())


async def _settled_connection_threads(expected: int) -> int:
    """A closed connection's thread exits just after close() returns: poll, bounded."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while (count := _connection_threads()) != expected and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return count


# -- files -------------------------------------------------------------------


async def test_database_file_and_its_wal_are_private(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    async with SqliteTaskStore(path) as store:
        await store.create(make_snapshot("t"))
        wal = tmp_path / "tasks.db-wal"
        shm = tmp_path / "tasks.db-shm"
        assert wal.exists()
        assert shm.exists()
        assert (_mode(path), _mode(wal), _mode(shm)) == (0o600, 0o600, 0o600)


async def test_missing_directory_is_unavailable_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "tasks.db"
    store = SqliteTaskStore(path)
    with pytest.raises(StoreUnavailable, match="does not exist"):
        await store.get("t")
    assert not path.parent.exists()
    await store.close()


async def test_read_only_location_is_unavailable(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        location = Path("/sys")  # root ignores permission bits; sysfs refuses new files
    else:
        location = tmp_path / "read-only"
        location.mkdir(mode=0o500)
    store = SqliteTaskStore(location / "chongming-test.db")
    with pytest.raises(StoreUnavailable, match="read-only"):
        await store.open()
    await store.close()


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database" * 200)
    before = _digest(path)
    threads = await _settled_connection_threads(0)
    store = SqliteTaskStore(path)
    with pytest.raises(StoreUnavailable, match="not a SQLite database"):
        await store.open()
    assert await _settled_connection_threads(threads) == threads
    await store.close()
    assert _digest(path) == before


# -- schema ------------------------------------------------------------------


async def test_migration_from_an_empty_file_records_every_version(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    path.touch(mode=0o600)
    async with SqliteTaskStore(path) as store:
        await store.create(make_snapshot("t"))
    async with SqliteTaskStore(path) as store:  # a second open finds nothing to do
        assert await store.get("t") == make_snapshot("t")
    with sqlite3.connect(path) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    conn.close()
    assert versions == list(range(1, LATEST_VERSION + 1))
    assert {"tasks", "transitions", "commands", "schema_version"} <= tables
    assert {"tasks_by_status", "tasks_by_bucket", "tasks_by_owner", "tasks_by_name"} <= tables
    assert mode == "wal"


async def test_a_newer_schema_is_refused_and_the_file_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    async with SqliteTaskStore(path) as store:
        await store.create(make_snapshot("t"))
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (?, 'future', 0)",
            (LATEST_VERSION + 1,),
        )
    conn.close()
    before = _digest(path)
    threads = await _settled_connection_threads(0)
    store = SqliteTaskStore(path)
    with pytest.raises(SchemaError, match="newer chongming") as raised:
        await store.get("t")
    assert await _settled_connection_threads(threads) == threads
    assert f"schema version {LATEST_VERSION + 1}" in str(raised.value)
    await store.close()
    assert _digest(path) == before


# -- disk full ---------------------------------------------------------------


async def test_disk_full_is_typed_rolled_back_and_recoverable(tmp_path: Path) -> None:
    async with SqliteTaskStore(tmp_path / "tasks.db") as store:
        await _fill_and_recover(store)


async def _fill_and_recover(store: SqliteTaskStore) -> None:
    await store.create(make_snapshot("anchor"))
    # The size cap is per connection, so it goes on the writer's own connection.
    conn = store._writer_conn  # a driver test reaches into the driver
    assert conn is not None
    ((pages,),) = await conn.fetchall("PRAGMA page_count")
    await conn.execute(f"PRAGMA max_page_count = {pages + 8}")

    acknowledged: list[TaskSnapshot] = []
    padding = "x" * 3000
    full: StoreFull | None = None
    for i in range(200):
        snapshot = make_snapshot(f"t-{i:03d}", args=(padding,))
        try:
            await store.create(snapshot)
        except StoreFull as error:
            full = error
            break
        acknowledged.append(snapshot)
    assert full is not None, "the cap was reached"
    assert "rolled back" in str(full)
    assert acknowledged, "some writes fit before the cap"
    anchor = await store.get("anchor")
    assert anchor is not None
    queued, transition = next_step(anchor, _S.QUEUED, result=padding * 20)
    with pytest.raises(StoreFull):
        await store.save(queued, expect_version=0, transitions=[transition])
    assert await store.get("anchor") == anchor, "nothing half-applied"
    assert await store.history("anchor") == []
    ((check,),) = await conn.fetchall("PRAGMA integrity_check")
    assert check == "ok"

    await conn.execute("PRAGMA max_page_count = 1073741823")
    await store.save(queued, expect_version=0, transitions=[transition])
    await store.create(make_snapshot("after", args=(padding,)))
    for snapshot in acknowledged:
        assert await store.get(snapshot.task_id) == snapshot
    assert await store.history("anchor") == [transition]


# -- group commit ------------------------------------------------------------


async def test_group_commit_keeps_each_tasks_order_inside_one_batch(tmp_path: Path) -> None:
    async with SqliteTaskStore(tmp_path / "tasks.db") as store:
        await store.open()
        snapshot = make_snapshot("t")
        calls = [store.create(snapshot)]
        progress = [Progress(done=i) for i in range(4)]
        for i, to in enumerate((_S.QUEUED, _S.STARTING, _S.RUNNING, _S.SUCCEEDED)):
            calls.append(store.touch("t", progress=progress[i]))
            new, transition = next_step(snapshot, to)
            calls.append(store.save(new, snapshot.status_version, [transition]))
            snapshot = new
        calls.append(store.touch("t", progress=progress[-1]))
        writer = store._writer  # counting batches is the point here
        assert writer is not None
        batches_before = writer.batches
        # Started in order without awaiting each other: one batch, applied in order.
        await asyncio.gather(*calls)
        assert writer.batches - batches_before == 1
        stored = await store.get("t")
        assert stored is not None
        assert (stored.status, stored.status_version, stored.progress) == (
            _S.SUCCEEDED,
            4,
            progress[-1],
        )
        assert [t.version for t in await store.history("t")] == [1, 2, 3, 4]


async def test_many_concurrent_writers_share_transactions(tmp_path: Path) -> None:
    async with SqliteTaskStore(tmp_path / "tasks.db") as store:

        async def trajectory(i: int) -> TaskSnapshot:
            snapshot = make_snapshot(f"t-{i:03d}", bucket=i % 4)
            await store.create(snapshot)
            for to in (_S.QUEUED, _S.STARTING, _S.RUNNING, _S.SUCCEEDED):
                new, transition = next_step(snapshot, to)
                await store.save(new, snapshot.status_version, [transition])
                await store.touch(snapshot.task_id, heartbeat=transition.at)
                snapshot = new
            return snapshot

        finals = await asyncio.gather(*(trajectory(i) for i in range(300)))
        writer = store._writer
        assert writer is not None
        assert writer.ops == 300 * 9
        assert writer.batches < writer.ops / 20, "writes are grouped"
        for final in finals:
            history = await store.history(final.task_id)
            assert fold_history(history).status_version == 4
            stored = await store.get(final.task_id)
            assert stored is not None
            assert stored.status_version == final.status_version
            assert stored.last_heartbeat_at == history[-1].at


async def test_one_conflict_does_not_fail_its_batch(tmp_path: Path) -> None:
    async with SqliteTaskStore(tmp_path / "tasks.db") as store:
        snapshots = [make_snapshot(f"t-{i}") for i in range(20)]
        for snapshot in snapshots:
            await store.create(snapshot)
        moves = [next_step(s, _S.QUEUED) for s in snapshots]
        stale = 7
        results = await asyncio.gather(
            *(
                store.save(new, 5 if i == stale else 0, [transition])
                for i, (new, transition) in enumerate(moves)
            ),
            return_exceptions=True,
        )
        assert isinstance(results[stale], VersionConflict)
        assert [r for i, r in enumerate(results) if i != stale] == [None] * 19
        assert await store.get("t-7") == snapshots[stale]
        assert await store.history("t-7") == []
        assert await store.get("t-8") == moves[8][0]


# -- cancellation and shutdown -----------------------------------------------


async def test_cancelled_writers_never_break_the_writer_or_half_apply(tmp_path: Path) -> None:
    rng = random.Random(20261002)
    async with SqliteTaskStore(tmp_path / "tasks.db") as store:
        ids = [f"t-{i:03d}" for i in range(60)]

        async def trajectory(task_id: str) -> None:
            snapshot = make_snapshot(task_id)
            await store.create(snapshot)
            for to in (_S.QUEUED, _S.STARTING, _S.RUNNING, _S.SUCCEEDED):
                new, transition = next_step(snapshot, to)
                await store.save(new, snapshot.status_version, [transition])
                snapshot = new

        for _round in range(3):
            tasks = [asyncio.create_task(trajectory(f"{task_id}-{_round}")) for task_id in ids]
            for _ in range(rng.randrange(1, 12)):
                await asyncio.sleep(0)
            for task in rng.sample(tasks, len(tasks) // 2):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        writer_task = store._writer_task
        assert writer_task is not None
        assert not writer_task.done()
        await asyncio.wait_for(store.create(make_snapshot("after")), timeout=5)
        for _round in range(3):
            for task_id in ids:
                stored = await store.get(f"{task_id}-{_round}")
                history = await store.history(f"{task_id}-{_round}")
                if stored is None:
                    assert history == []
                    continue
                folded = fold_history(history)
                assert (folded.status, folded.status_version) == (
                    stored.status,
                    stored.status_version,
                ), "snapshot and history were written together or not at all"


async def test_close_finishes_queued_writes_and_leaks_no_thread(tmp_path: Path) -> None:
    threads_before = await _settled_connection_threads(0)
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    try:
        await store.open()
        assert _connection_threads() == threads_before + 2  # writer and reader connections
        writes = [asyncio.create_task(store.create(make_snapshot(f"t-{i}"))) for i in range(50)]
        await asyncio.sleep(0)  # every write is queued
    finally:
        await store.close()
    results = await asyncio.gather(*writes, return_exceptions=True)
    assert results == [None] * 50
    with pytest.raises(StoreClosed):
        await store.create(make_snapshot("late"))
    assert await _settled_connection_threads(threads_before) == threads_before
    async with SqliteTaskStore(path) as reopened:
        assert len(await reopened.history("t-0")) == 0
        assert all([await reopened.get(f"t-{i}") is not None for i in range(50)])


async def test_store_clock_never_goes_backwards(monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteTaskStore(":memory:")
    readings = iter([2_000_000_000_000, 1_000_000_000_000, 3_000_000_000_000])
    monkeypatch.setattr("chongming.stores.sqlite.store.time.time_ns", lambda: next(readings))
    assert [store._now_micros() for _ in range(3)] == [
        2_000_000_000,
        2_000_000_000,
        3_000_000_000,
    ]
    await store.close()


async def test_wait_command_hint_wakes_on_a_local_submit() -> None:
    from datetime import UTC, datetime

    from chongming.stores.nodes import Command, CommandKind

    async with SqliteTaskStore(":memory:") as store:
        waiter = asyncio.create_task(store.wait_command_hint())
        await asyncio.sleep(0)
        command = Command(
            command_id="c", task_id="t", kind=CommandKind.STOP, created_at=datetime.now(UTC)
        )
        await store.submit_command(command)
        await asyncio.wait_for(waiter, timeout=2)
