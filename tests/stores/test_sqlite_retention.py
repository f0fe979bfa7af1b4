"""SQLite retention: free pages go back to the file system when the file uses incremental vacuum."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chongming.stores.retention import PruneSelection
from chongming.stores.sqlite import SqliteTaskStore
from tests.control.test_retention import seed_terminal


def _pages(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    return int(pages), int(free)


async def _seed_and_prune(db: Path) -> tuple[int, int, int]:
    """Pages before, pages after and free pages after pruning 2,000 seeded tasks."""
    async with SqliteTaskStore(db) as store:
        await seed_terminal(store, [f"old-{n:05d}" for n in range(2000)])
    before, _ = _pages(db)
    cut = datetime.now(UTC) - timedelta(days=7)
    async with SqliteTaskStore(db) as store:
        while await store.prune_tasks(PruneSelection(finished_before=cut), limit=500) == 500:
            pass
        assert await store.count_prunable(PruneSelection(finished_before=cut)) == 0
    after, free = _pages(db)
    return before, after, free


async def test_an_incremental_vacuum_file_shrinks_as_it_is_pruned(tmp_path: Path) -> None:
    db = tmp_path / "incremental.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
    before, after, free = await _seed_and_prune(db)
    assert after < before / 2, (before, after)
    assert free < 50


async def test_a_default_file_keeps_its_pages_free_for_new_rows(tmp_path: Path) -> None:
    before, after, free = await _seed_and_prune(tmp_path / "default.db")
    assert after == before
    assert free > before / 2, (before, free)
