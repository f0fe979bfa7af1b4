"""``chongming schedules [ls|pause|resume|trigger|rm]``: table, --json, and one-line errors."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chongming.state.query import TaskQuery
from chongming.stores.schedules import ScheduleRecord
from chongming.stores.sqlite import SqliteTaskStore
from tests.cli.support import as_json, assert_one_line_error, invoke

AHEAD = datetime(2030, 1, 1, 1, 30, tzinfo=UTC)


async def _with_schedules(db: Path) -> None:
    async with SqliteTaskStore(db) as store:
        await store.put_schedule(
            ScheduleRecord(
                key="nightly", task_name="report", cron="30 2 * * *",
                timezone="Europe/Berlin", next_fire=AHEAD,
            )
        )  # fmt: skip
        await store.put_schedule(
            ScheduleRecord(
                key="pulse", task_name="ping", every=timedelta(minutes=5),
                kwargs={"n": 1}, next_fire=AHEAD, catch_up="all",
            )
        )  # fmt: skip


async def _tasks(db: Path) -> list[str]:
    async with SqliteTaskStore(db) as store:
        return [t.name for t in await store.query(TaskQuery())]


def test_ls_shows_the_cadence_in_words_and_the_next_fire(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    asyncio.run(_with_schedules(db))
    for args in (("schedules",), ("schedules", "ls")):
        result = invoke(db, *args)
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].split() == [
            "KEY", "TASK", "CADENCE", "STATE", "NEXT", "FIRE", "LAST", "FIRED", "CATCH-UP"
        ]  # fmt: skip
        assert "at 02:30 every day (Europe/Berlin)" in lines[2]
        assert "2030-01-01 01:30:00Z" in lines[2]
        assert "every 5 minutes" in lines[3]
        assert "all" in lines[3]
    data = as_json(invoke(db, "schedules", "ls", "--json"))
    pulse = data["schedules"][1]
    assert pulse["description"] == "every 5 minutes"
    assert pulse["every_seconds"] == 300.0
    assert pulse["kwargs"] == {"n": 1}
    assert pulse["next_fire"] == "2030-01-01T01:30:00+00:00"


def test_pause_resume_trigger_rm(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    asyncio.run(_with_schedules(db))
    assert as_json(invoke(db, "schedules", "pause", "pulse", "--json"))["paused"] is True
    assert "paused" in invoke(db, "schedules").stdout.splitlines()[3]
    resumed = as_json(invoke(db, "schedules", "resume", "pulse", "--json"))
    assert resumed["paused"] is False
    triggered = as_json(invoke(db, "schedules", "trigger", "pulse", "--json"))
    assert triggered["key"] == "pulse"
    assert asyncio.run(_tasks(db)) == ["ping"]
    assert invoke(db, "schedules", "rm", "pulse").stdout.strip() == "removed pulse"
    keys = [s["key"] for s in as_json(invoke(db, "schedules", "--json"))["schedules"]]
    assert keys == ["nightly"]


def test_unknown_keys_fail_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    asyncio.run(_with_schedules(db))
    for command in ("pause", "resume", "trigger", "rm"):
        message = assert_one_line_error(invoke(db, "schedules", command, "nobody"))
        assert "no schedule 'nobody'" in message
    assert len(as_json(invoke(db, "schedules", "--json"))["schedules"]) == 2
