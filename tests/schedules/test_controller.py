"""Controller.schedule and @task(schedule=...): checked before anything is written; two
workers on one store fire every tick exactly once."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller, task
from chongming.errors import ScheduleInvalid, UnknownSchedule, UnknownTask
from chongming.state.query import TaskQuery
from chongming.stores.base import TaskStore
from chongming.stores.schedules import tick_key
from tests.control.both_stores import StoreMaker, stores, where

__all__ = ["stores", "where"]  # the fixtures, used by name


def ping(ctx: object, n: int = 0) -> int:
    return n


@task(schedule="*/5 * * * *", timezone="Europe/Berlin")
def report(ctx: object) -> str:
    return "sent"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ({"cron": "every tuesday"}, "cron"),
        ({"cron": "0 0 30 2 *"}, "cron"),  # Feb 30: it would never fire
        ({"cron": "*/5 * * * *", "timezone": "Europe/Atlantis"}, "timezone"),
        ({"every": timedelta(0)}, "every"),
        ({"every": timedelta(minutes=-1)}, "every"),
        ({"cron": "*/5 * * * *", "every": timedelta(minutes=5)}, "cron"),
        ({}, "cron"),
        ({"every": timedelta(minutes=5), "catch_up": "sometimes"}, "catch_up"),
        ({"every": timedelta(minutes=5), "args": [1, 2, 3]}, "args"),  # does not fit ping
        ({"every": timedelta(minutes=5), "args": [float("nan")]}, "args"),
        ({"every": timedelta(minutes=5), "key": ""}, "key"),
    ],
)
async def test_bad_input_names_the_field_and_writes_nothing(
    tmp_path: Path, call: dict[str, Any], field: str
) -> None:
    async with Controller(store=tmp_path / "s.db") as controller:
        controller.register("ping", ping)
        with pytest.raises(ScheduleInvalid) as caught:
            await controller.schedule("ping", **call)
        assert caught.value.field == field
        assert await controller.schedules() == []


async def test_an_unknown_task_name_is_refused_and_nothing_written(tmp_path: Path) -> None:
    async with Controller(store=tmp_path / "s.db") as controller:
        with pytest.raises(UnknownTask):
            await controller.schedule("nobody-serves-this", every=timedelta(minutes=1))
        assert await controller.schedules() == []
        with pytest.raises(UnknownSchedule):
            await controller.pause_schedule("missing")


def test_a_bad_task_decorator_schedule_fails_at_definition() -> None:
    with pytest.raises(ScheduleInvalid) as caught:
        task(schedule="0 0 30 2 *")(ping)
    assert caught.value.field == "schedule"
    assert "never fires" in str(caught.value)
    with pytest.raises(ScheduleInvalid) as caught:
        task(timezone="Europe/Berlin")(ping)  # a zone with no schedule
    assert caught.value.field == "schedule"
    with pytest.raises(ScheduleInvalid) as caught:
        task(schedule="* * * * *", timezone="Nowhere/Special")(ping)
    assert caught.value.field == "timezone"


async def test_a_worker_puts_its_task_schedules_and_a_restart_keeps_them(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with Controller(store=db, work=True, owner="w1") as controller:
        controller.register("report", report)
        assert controller._worker is not None
        assert controller._worker.schedules is not None
        async with asyncio.timeout(10):
            while not await controller.schedules():
                await asyncio.sleep(0.02)
        (first,) = await controller.schedules()
    assert (first.key, first.cron, first.timezone) == ("report", "*/5 * * * *", "Europe/Berlin")
    async with Controller(store=db, work=True, owner="w2") as controller:
        controller.register("report", report)
        await asyncio.sleep(0.2)
        (again,) = await controller.schedules()
        assert again.revision == first.revision
        assert again.next_fire == first.next_fire


async def test_pause_resume_trigger_remove(tmp_path: Path) -> None:
    async with Controller(store=tmp_path / "s.db") as controller:
        controller.register("ping", ping)
        made = await controller.schedule("ping", every=timedelta(hours=1), kwargs={"n": 7})
        assert made.kwargs == {"n": 7}
        assert made.catch_up == "latest"
        assert (await controller.pause_schedule("ping")).paused
        resumed = await controller.resume_schedule("ping")
        assert not resumed.paused
        assert resumed.next_fire >= made.next_fire
        queued = await controller.trigger_schedule("ping")
        snapshot = await queued.get()
        assert snapshot.name == "ping"
        assert snapshot.kwargs == {"n": 7}
        assert await controller.remove_schedule("ping")
        assert await controller.schedules() == []


async def test_two_workers_on_one_store_fire_every_tick_exactly_once(
    where: object, stores: StoreMaker
) -> None:
    period = timedelta(milliseconds=200)
    first_store: TaskStore | Path = stores.make(where)
    second_store: TaskStore | Path = stores.make(where) if not isinstance(where, Path) else where
    async with (
        Controller(store=first_store, work=True, owner="w1") as one,
        Controller(store=second_store, work=True, owner="w2") as two,
    ):
        for controller in (one, two):
            controller.register("ping", ping)
        record = await one.schedule("ping", every=period, catch_up="all")
        two._worker.schedules.wake()  # type: ignore[union-attr]
        async with asyncio.timeout(30):
            while len(await one.list_tasks(TaskQuery())) < 12:
                await asyncio.sleep(0.05)
        await one.pause_schedule("ping")
        tasks = await one.list_tasks(TaskQuery())
        loops = [c._worker.schedules.statistics() for c in (one, two)]  # type: ignore[union-attr]
    keys = sorted(t.idempotency_key or "" for t in tasks)
    assert len(keys) == len(set(keys))  # none twice
    fired = sorted(t.idempotency_key or "" for t in tasks)
    expected = [tick_key("ping", record.next_fire + k * period) for k in range(len(fired))]
    assert fired == expected  # none skipped: contiguous from the first tick
    assert sum(loop.fires_won for loop in loops) >= len(fired) // 100 + 1
    assert all(loop.passes > 0 for loop in loops)
