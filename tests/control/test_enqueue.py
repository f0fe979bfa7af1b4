"""``Controller.enqueue``: a queued row with its recipe, for whichever node serves the name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming import (
    ConfigurationError,
    Controller,
    IdempotencyConflict,
    PayloadError,
    TaskStatus,
)


async def extract(ctx: Any, day: str, *, limit: int = 10) -> str:
    return day


async def test_enqueue_writes_a_queued_row_nobody_runs_yet(tmp_path: Path) -> None:
    async with Controller(store=tmp_path / "q.db", owner="client") as client:
        queued = await client.enqueue(
            "extract",
            "2026-10-02",
            task_id="e-1",
            bucket_key="tenant-A",
            priority=7,
            idempotency_key="order-1",
            version=2,
            label="每日抽取",
            tags={"io"},
            limit=3,
        )
        assert queued.created
        assert queued.task_id == "e-1"
        stored = await queued.get()
        assert stored.status is TaskStatus.QUEUED
        assert stored.owner is None
        assert (stored.name, stored.version, stored.priority) == ("extract", 2, 7)
        assert stored.args == ("2026-10-02",)
        assert stored.kwargs == {"limit": 3}
        assert stored.bucket == client.buckets.bucket_for("tenant-A")
        assert stored.idempotency_key == "order-1"
        assert stored.label == "每日抽取"
        assert stored.tags == frozenset({"io"})
        history = await client.history("e-1")
        assert [(t.from_status, t.to_status, t.trigger) for t in history] == [
            (TaskStatus.PENDING, TaskStatus.QUEUED, "orchestrator:enqueued")
        ]
        # Not a worker: the client never claims what it enqueued.
        with pytest.raises(TimeoutError):
            await queued.wait(timeout=0.3)
        assert (await queued.get()).owner is None


async def test_the_same_key_answers_with_the_first_task_or_refuses_other_input(
    tmp_path: Path,
) -> None:
    async with Controller(store=tmp_path / "q.db") as client:
        first = await client.enqueue("extract", "d1", idempotency_key="k")
        again = await client.enqueue("extract", "d1", idempotency_key="k")
        assert not again.created
        assert again.task_id == first.task_id
        with pytest.raises(IdempotencyConflict) as caught:
            await client.enqueue("extract", "d2", idempotency_key="k")
        assert caught.value.task_id == first.task_id
        assert len(await client.list_tasks()) == 1


async def test_a_registered_name_is_checked_against_its_function(tmp_path: Path) -> None:
    async with Controller(store=tmp_path / "q.db") as client:
        client.register("extract", extract)
        with pytest.raises(ConfigurationError, match="do not fit"):
            await client.enqueue("extract", "d1", nope=1)
        queued = await client.enqueue("extract", "d1")
        assert (await queued.get()).max_attempts == 1
        assert [t.task_id for t in await client.list_tasks()] == [queued.task_id]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"idempotency_key": "nul\x00"}, ConfigurationError, "idempotency_key"),
        ({"idempotency_key": "k" * 10_000}, ConfigurationError, "1 to 1000"),
        ({"not_before": datetime(2026, 1, 1)}, ConfigurationError, "aware"),
        ({"not_before": "tomorrow"}, ConfigurationError, "aware datetime"),
        ({"version": -1}, ConfigurationError, "version"),
        ({"priority": 2**40}, ConfigurationError, "priority"),
        ({"task_id": "bad\x00id"}, PayloadError, "task_id"),
        ({"value": object()}, PayloadError, "JSON"),
        ({"value": float("nan")}, PayloadError, "NaN"),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_written(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    async with Controller(store=tmp_path / "q.db") as client:
        with pytest.raises(error, match=words):
            await client.enqueue("extract", **kwargs)
        assert await client.list_tasks() == []


async def test_an_unregistered_name_and_bad_names(tmp_path: Path) -> None:
    async with Controller(store=tmp_path / "q.db") as client:
        queued = await client.enqueue("nobody-serves-this")  # accepted: it waits, visibly
        assert (await queued.get()).status is TaskStatus.QUEUED
        for name in ("", "bad\x00name", "n" * 10_000):
            with pytest.raises(ConfigurationError):
                await client.enqueue(name)
        assert len(await client.list_tasks()) == 1


async def test_enqueue_needs_a_store() -> None:
    async with Controller() as controller:
        with pytest.raises(ConfigurationError, match="store"):
            await controller.enqueue("extract")


async def test_not_before_in_the_past_means_now(tmp_path: Path) -> None:
    past = datetime.now(UTC) - timedelta(days=1)
    async with Controller(store=tmp_path / "q.db") as client:
        queued = await client.enqueue("extract", not_before=past)
        assert (await queued.get()).not_before == past
