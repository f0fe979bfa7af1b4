"""Schedules: a cron in a time zone, and a fast heartbeat fired by two workers exactly once.

    python docs/examples/schedules.py

Two workers (``Controller(work=True)``) share one SQLite file; both run the
scheduler. Each tick of the heartbeat is enqueued once, by whichever worker
decides it first, with the tick's time in its idempotency key.
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chongming import Controller, TaskContext, task
from chongming.errors import ScheduleInvalid
from chongming.schedules.cadence import make_cadence
from chongming.schedules.loop import cadence_of


@task(schedule="30 2 * * *", timezone="Europe/Berlin")
def nightly_report(ctx: TaskContext) -> str:
    return "report sent"


def heartbeat(ctx: TaskContext) -> str:
    return "ok"


def show_the_fall_back_night() -> None:
    cadence = make_cadence(cron="30 2 * * *", timezone="Europe/Berlin")
    print(f"nightly_report: {cadence.describe()}")
    tick = datetime(2026, 10, 23, 12, tzinfo=UTC)
    for _ in range(3):  # 25 October 2026: 02:00-03:00 happens twice in Berlin
        tick = cadence.next_after(tick)
        print(f"  fires {tick.astimezone(cadence.zone):%Y-%m-%d %H:%M %Z}")


async def main() -> None:
    show_the_fall_back_night()
    db = Path(tempfile.mkdtemp()) / "tasks.db"
    async with (
        Controller(store=db, work=True, owner="worker-a") as a,
        Controller(store=db, work=True, owner="worker-b") as b,
    ):
        for worker in (a, b):
            worker.register("nightly_report", nightly_report)
            worker.register("heartbeat", heartbeat)
        try:
            await a.schedule("heartbeat", cron="0 0 30 2 *")
        except ScheduleInvalid as error:
            print(f"refused ({error.field}): {error}")
        every = timedelta(milliseconds=200)
        made = await a.schedule("heartbeat", every=every, catch_up="all")
        print(f"heartbeat: {cadence_of(made).describe()}, catch-up {made.catch_up}")
        while len([t for t in await a.list_tasks() if t.name == "heartbeat"]) < 5:
            await asyncio.sleep(0.05)
        await a.pause_schedule("heartbeat")
        tasks = await a.list_tasks()
        keys = sorted(t.idempotency_key or "" for t in tasks if t.name == "heartbeat")
        for record in await b.schedules():
            state = "paused" if record.paused else "active"
            print(f"schedule {record.key}: {state}")
    ticks = [made.next_fire + k * every for k in range(len(keys))]
    print(f"each tick once: {len(keys) == len(set(keys))}")
    expected = sorted(f"schedule:heartbeat:{t.isoformat()}" for t in ticks)
    print(f"no tick skipped: {keys == expected}")


if __name__ == "__main__":
    asyncio.run(main())
