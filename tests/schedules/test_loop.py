"""The scheduler loop on a fake store clock: catch-up, clock steps, racing loops, wake-ups."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from chongming.controller.schedules import tick_builder
from chongming.errors import StoreError
from chongming.schedules.cadence import make_cadence
from chongming.schedules.loop import ScheduleDraft, ScheduleLoop, put_draft
from chongming.state.query import TaskQuery
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.schedules import tick_key
from chongming.task_api.registry import TaskRegistry
from tests.stores.test_contract_memory import ManualClock

MINUTE = timedelta(minutes=1)


class _Clock:
    def __init__(self, manual: ManualClock) -> None:
        self._manual = manual

    def time(self) -> float:
        return self._manual.now.timestamp()


def _ping(ctx: object) -> str:
    return "pong"


def _loop(store: InMemoryTaskStore, clock: ManualClock) -> ScheduleLoop:
    registry = TaskRegistry()
    registry.register("ping", _ping)
    return ScheduleLoop(store, tick_builder(registry, _Clock(clock), None), refresh=120.0)


async def _setup(policy: str = "latest") -> tuple[InMemoryTaskStore, ManualClock, datetime]:
    clock = ManualClock()
    clock.now = datetime(2026, 10, 2, 12, 0, 30, tzinfo=UTC)
    store = InMemoryTaskStore(clock=clock)
    draft = ScheduleDraft(
        key="minutely", task_name="ping", cadence=make_cadence(every=MINUTE), catch_up=policy
    )
    record = await put_draft(store, draft)
    assert record.next_fire == datetime(2026, 10, 2, 12, 1, tzinfo=UTC)
    return store, clock, record.next_fire


async def _keys(store: InMemoryTaskStore) -> list[str]:
    return sorted(t.idempotency_key or "" for t in await store.query(TaskQuery()))


async def test_a_pass_fires_a_due_tick_once_and_sleeps_until_the_next() -> None:
    store, clock, first = await _setup()
    loop = _loop(store, clock)
    assert await loop.run_once() == pytest.approx(30.0, abs=0.5)  # 12:00:30 -> 12:01:00
    assert await _keys(store) == []
    clock.now = first + timedelta(seconds=1)
    assert await loop.run_once() == pytest.approx(59.0, abs=0.5)
    assert await loop.run_once() == pytest.approx(59.0, abs=0.5)  # nothing new: the tick is decided
    assert await _keys(store) == [tick_key("minutely", first)]
    (task,) = await store.query(TaskQuery())
    assert task.name == "ping"
    assert task.label == "minutely"
    await store.close()


@pytest.mark.parametrize(
    ("policy", "fired"),
    [("all", list(range(10))), ("latest", [9]), ("skip", [])],
)
async def test_catch_up_after_ten_missed_ticks(policy: str, fired: list[int]) -> None:
    store, clock, first = await _setup(policy)
    loop = _loop(store, clock)
    clock.now = first + 9 * MINUTE + timedelta(seconds=30)  # ten ticks due, the newest 30 s late
    await loop.run_once()
    await loop.run_once()
    assert await _keys(store) == sorted(tick_key("minutely", first + k * MINUTE) for k in fired)
    clock.now = first + 10 * MINUTE + timedelta(seconds=1)  # the next tick, on time
    await loop.run_once()
    assert tick_key("minutely", first + 10 * MINUTE) in await _keys(store)
    await store.close()


async def test_a_clock_step_back_neither_repeats_nor_skips_a_tick() -> None:
    store, clock, first = await _setup("all")
    loop = _loop(store, clock)
    clock.now = first + 2 * MINUTE + timedelta(seconds=1)
    await loop.run_once()
    clock.now -= timedelta(hours=1)  # the clock jumps back an hour
    for _ in range(3):
        await loop.run_once()
    assert len(await _keys(store)) == 3
    clock.now = first + 5 * MINUTE + timedelta(seconds=1)  # and catches up again
    await loop.run_once()
    assert await _keys(store) == sorted(tick_key("minutely", first + k * MINUTE) for k in range(6))
    await store.close()


async def test_racing_loops_fire_each_tick_exactly_once() -> None:
    store, clock, first = await _setup("all")
    loops = [_loop(store, clock) for _ in range(4)]
    for step in range(1, 30):
        clock.now = first + step * timedelta(seconds=20)
        await asyncio.gather(*(loop.run_once() for loop in loops))
    keys = await _keys(store)
    assert len(keys) == len(set(keys))
    assert keys == sorted(tick_key("minutely", first + k * MINUTE) for k in range(10))
    won = sum(loop.statistics().fires_won for loop in loops)
    assert won == 10  # one decision per tick, whoever made it
    await store.close()


async def test_a_paused_schedule_fires_nothing() -> None:
    store, clock, first = await _setup()
    loop = _loop(store, clock)
    await store.pause_schedule("minutely", paused=True)
    clock.now = first + 5 * MINUTE
    assert await loop.run_once() == pytest.approx(
        120.0, abs=0.5
    )  # nothing to wait for: the refresh
    assert await _keys(store) == []
    await store.close()


async def test_the_loop_wakes_on_change_and_closes_cleanly() -> None:
    store = InMemoryTaskStore()
    registry = TaskRegistry()
    registry.register("ping", _ping)
    from chongming.clock import SYSTEM_CLOCK

    loop = ScheduleLoop(store, tick_builder(registry, SYSTEM_CLOCK, None), refresh=600.0)
    loop.start()
    await asyncio.sleep(0)
    while loop.statistics().passes == 0:  # the first pass found nothing: it sleeps 600 s
        await asyncio.sleep(0.01)
    draft = ScheduleDraft(
        key="fast", task_name="ping", cadence=make_cadence(every=timedelta(milliseconds=100))
    )
    await put_draft(store, draft)
    loop.wake()  # without it, the loop would look again only after the 600 s refresh
    async with asyncio.timeout(10):
        while len(await store.query(TaskQuery())) < 2:
            await asyncio.sleep(0.02)
    await loop.aclose()
    passes = loop.statistics().passes
    await asyncio.sleep(0.3)
    assert loop.statistics().passes == passes  # closed: no more passes
    await store.close()


async def test_a_pass_failing_the_same_way_again_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A role that may not write schedules fails every pass alike: one warning, not one a pass."""
    store, clock, first = await _setup()
    clock.now = first + timedelta(seconds=1)
    refused = {"on": True}
    fire = store.fire_schedule

    async def fire_or_refuse(*args: object, **kwargs: object) -> object:
        if refused["on"]:
            raise StoreError("permission denied for table schedules")
        return await fire(*args, **kwargs)  # type: ignore[arg-type]

    store.fire_schedule = fire_or_refuse  # type: ignore[method-assign, assignment]
    loop = ScheduleLoop(store, tick_builder(TaskRegistry(), _Clock(clock), None), refresh=0.01)
    caplog.set_level(logging.DEBUG, logger="chongming")
    loop.start()
    async with asyncio.timeout(10):
        while loop.statistics().errors < 5:
            await asyncio.sleep(0.01)
    refused["on"] = False
    async with asyncio.timeout(10):
        while loop.statistics().errors and not any(
            "succeeded again" in r.getMessage() for r in caplog.records
        ):
            await asyncio.sleep(0.01)
    await loop.aclose()
    failures = [r for r in caplog.records if "scheduler pass failed" in r.getMessage()]
    assert len(failures) >= 5
    assert [r.levelno for r in failures].count(logging.WARNING) == 1
    assert failures[0].levelno == logging.WARNING
    await store.close()
