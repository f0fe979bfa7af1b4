"""``ClaimLoop``: what a worker asks the store for before each claim."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chongming import Controller, SqliteTaskStore
from chongming.plane.claims import ClaimLoop
from chongming.state.records import TaskSnapshot


async def test_exclude_tags_is_asked_before_every_claim(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        await client.enqueue("job", task_id="plain")
        await client.enqueue("job", task_id="gpu", tags={"gpu"})
        await client.enqueue("job", task_id="io", tags={"io"})
    store = SqliteTaskStore(db)
    excluded = {"gpu", "io"}
    asked = 0
    batches: asyncio.Queue[list[str]] = asyncio.Queue()

    def exclude() -> set[str]:
        nonlocal asked
        asked += 1
        return set(excluded)

    async def adopt(batch: list[TaskSnapshot]) -> None:
        batches.put_nowait([t.task_id for t in batch])

    loop = ClaimLoop(
        store,
        owner="worker",
        serves=lambda: {"job": [None]},
        buckets=None,
        free_slots=lambda: 10,
        adopt=adopt,
        poll_interval=0.02,
        exclude_tags=exclude,
    )
    try:
        loop.start()
        assert await asyncio.wait_for(batches.get(), 10) == ["plain"]  # the tagged ones wait
        excluded.discard("io")
        assert await asyncio.wait_for(batches.get(), 10) == ["io"]
        excluded.clear()
        assert await asyncio.wait_for(batches.get(), 10) == ["gpu"]
        assert asked >= 3  # asked before each claim, not once at the start
        stored = await store.get("gpu")
        assert stored is not None
        assert stored.owner == "worker"
    finally:
        await loop.aclose()
        await store.close()
