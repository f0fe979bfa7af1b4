"""The write-through's records are trusted: prove they are what every check would let through.

The write-through marks its writes ``trusted`` (stores/writes.py), so the
stores do not check them again. That is sound only if the runtime checked
them where it made them. These tests run real tasks — hostile texts, a
failure whose message no store can hold as raised, progress, tags, payloads
that change shape in JSON — through a controller on each built-in store and
then check every stored record with the full checks of the public path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, TaskStatus
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES
from chongming.state.query import TaskQuery
from chongming.stores.base import TaskStore
from chongming.stores.checks import check_snapshot, check_transitions
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.sqlite import SqliteTaskStore
from chongming.stores.stored import as_stored
from chongming.stores.writes import StateWrite

HOSTILE = "x'); drop table t; -- 重明 \u202e"


async def shaped(ctx: Any, n: int, *, rows: Any) -> Any:
    ctx.progress(n, total=10, unit="rows", message=HOSTILE)
    return {"n": n, "rows": rows, "pair": (1, 2), 3: "int key"}


async def fails(ctx: Any) -> None:
    raise ValueError("bad \x00 byte and a lone \udc80 surrogate")


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    made: TaskStore = (
        InMemoryTaskStore() if request.param == "memory" else SqliteTaskStore(tmp_path / "t.db")
    )
    async with made:
        yield made


async def test_records_the_write_through_stores_pass_every_check_of_the_public_path(
    store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[StateWrite] = []
    apply_writes = store.apply_writes

    async def spy(writes: Any) -> Any:
        sent.extend(writes)
        return await apply_writes(writes)

    monkeypatch.setattr(store, "apply_writes", spy)
    async with Controller(store=store, owner="node-a") as controller:
        controller.register("shaped", shaped)
        controller.register("fails", fails)
        for i in range(3):
            await controller.submit(
                "shaped",
                i,
                rows=[(i, "a"), {"k": (i,)}],
                label=f"{HOSTILE} {i}",
                bucket_key=f"tenant {HOSTILE}",
                tags=["io", HOSTILE],
            )
        await controller.submit("fails", label="fails")
        outcomes = await controller.wait_all()
    assert sorted(o.status for o in outcomes) == sorted(
        [TaskStatus.SUCCEEDED] * 3 + [TaskStatus.FAILED]
    )
    assert sent, "the write-through wrote through apply_writes"
    assert all(write.trusted for write in sent)
    for write in sent:  # what was sent: the full checks of create/save pass
        check_snapshot(write.snapshot, DEFAULT_MAX_PAYLOAD_BYTES)
        check_transitions(write.transitions)
        assert as_stored(write.snapshot, DEFAULT_MAX_PAYLOAD_BYTES) == write.snapshot
    stored = await store.query(TaskQuery())
    assert len(stored) == 4
    for snapshot in stored:  # and what was stored is what a checked write stores
        check_snapshot(snapshot, DEFAULT_MAX_PAYLOAD_BYTES)
        history = await store.history(snapshot.task_id)
        check_transitions(history)
        assert [t.version for t in history] == list(range(1, snapshot.status_version + 1))
        assert history[-1].to_status is snapshot.status
        if snapshot.status is TaskStatus.SUCCEEDED:
            assert snapshot.result["pair"] == [1, 2]
            assert snapshot.result["3"] == "int key"
            assert snapshot.progress is not None
            assert snapshot.progress.message == HOSTILE
        else:
            assert snapshot.failure is not None
            assert "\x00" not in snapshot.failure.message
            snapshot.failure.message.encode("utf-8")  # storable: no lone surrogate left
    # The same records written through the checked path come back identical.
    checked = InMemoryTaskStore()
    for snapshot in stored:
        await checked.create(dataclasses.replace(snapshot))
        assert await checked.get(snapshot.task_id) == snapshot
