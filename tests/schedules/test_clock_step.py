"""A node whose clock stepped back an hour, beside a healthy one on one SQLite file:
no tick fires twice, none is skipped, and the stepped-back node never fires a tick
early or again: it judges by the file's high-water clock, which it cannot move back."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from chongming.clock import SYSTEM_CLOCK
from chongming.controller.schedules import tick_builder
from chongming.schedules.cadence import make_cadence
from chongming.schedules.loop import ScheduleDraft, ScheduleLoop, put_draft
from chongming.state.query import TaskQuery
from chongming.stores.schedules import tick_key
from chongming.stores.sqlite import SqliteTaskStore
from chongming.task_api.registry import TaskRegistry

HOUR_MICROS = 3600 * 1_000_000
PERIOD = timedelta(milliseconds=200)


def _ping(ctx: object) -> str:
    return "pong"


async def test_a_clock_stepped_back_on_one_node_neither_repeats_nor_skips(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    healthy = SqliteTaskStore(db)
    behind = SqliteTaskStore(db)
    behind._now_micros = lambda: time.time_ns() // 1000 - HOUR_MICROS  # type: ignore[method-assign]
    registry = TaskRegistry()
    registry.register("ping", _ping)
    build = tick_builder(registry, SYSTEM_CLOCK, None)
    loops = [ScheduleLoop(store, build, refresh=0.05) for store in (healthy, behind)]
    # What the stepped-back node fires, beside the real time it fired at.
    fired_behind: list[tuple[float, float]] = []
    fire = behind.fire_schedule

    async def watched_fire(key: str, **kwargs: Any) -> Any:
        result = await fire(key, **kwargs)
        if result.won and kwargs["last_fired"] is not None:  # the latest tick it fired
            fired_behind.append((time.time(), kwargs["last_fired"].timestamp()))
        return result

    behind.fire_schedule = watched_fire  # type: ignore[method-assign]
    draft = ScheduleDraft(
        key="pulse", task_name="ping", cadence=make_cadence(every=PERIOD), catch_up="all"
    )
    first = (await put_draft(healthy, draft)).next_fire
    # The stepped-back node reads the fleet's clock, not its own: the high-water mark.
    assert await behind.schedule_clock() >= first - PERIOD
    deadline = asyncio.get_running_loop().time() + 2.0
    while asyncio.get_running_loop().time() < deadline:
        await loops[1].run_once()  # the stepped-back node looks first, every round
        await loops[0].run_once()
        await asyncio.sleep(0.03)
    await healthy.pause_schedule("pulse", paused=True)
    tasks = await healthy.query(TaskQuery())
    behind_view = loops[1].statistics()
    await healthy.close()
    await behind.close()
    keys = sorted(t.idempotency_key or "" for t in tasks)
    assert len(keys) == len(set(keys)) >= 5
    assert keys == sorted(tick_key("pulse", first + k * PERIOD) for k in range(len(keys)))
    # Its own clock says an hour ago, the file's says now: a tick is due for it only
    # once the fleet's decisions have raised the mark past it. Mostly the healthy node
    # has fired it by then; when the mark passed the next tick during the healthy
    # node's own fire, the stepped-back node fires that one, on time. Never early.
    assert behind_view.passes > 10
    assert behind_view.fires_won == len(fired_behind)
    for fired_at, latest_tick in fired_behind:
        assert latest_tick <= fired_at
    assert behind_view.fires_lost == 0
