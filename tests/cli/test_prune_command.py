"""``chongming prune``: deletes old terminal tasks only, counts on a dry run, refuses bad input."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming.state.query import TaskQuery
from chongming.state.status import TaskStatus
from chongming.stores.sqlite import SqliteTaskStore
from chongming.testing.store_contract import make_snapshot
from tests.cli.support import as_json, assert_one_line_error, invoke

_S = TaskStatus
_NOW = datetime.now(UTC)


def _finished(task_id: str, status: TaskStatus, age: timedelta, name: str = "extract"):  # type: ignore[no-untyped-def]
    at = _NOW - age
    return make_snapshot(
        task_id,
        name=name,
        status=status,
        status_version=3,
        created_at=at - timedelta(seconds=5),
        updated_at=at,
        finished_at=at if status.is_terminal else None,
    )


async def _populate(db: Path) -> None:
    async with SqliteTaskStore(db) as store:
        await store.create(_finished("old-ok", _S.SUCCEEDED, timedelta(days=30)))
        await store.create(_finished("old-bad", _S.FAILED, timedelta(days=30)))
        await store.create(_finished("old-report", _S.SUCCEEDED, timedelta(days=30), "report"))
        await store.create(_finished("young-ok", _S.SUCCEEDED, timedelta(hours=30)))
        await store.create(_finished("running", _S.RUNNING, timedelta(days=30)))


async def _left(db: Path) -> set[str]:
    async with SqliteTaskStore(db) as store:
        return {snapshot.task_id for snapshot in await store.query(TaskQuery())}


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "prune.db"
    asyncio.run(_populate(db))
    return db


_ALL = {"old-ok", "old-bad", "old-report", "young-ok", "running"}


def test_prune_deletes_terminal_tasks_older_than_the_age_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    db = _db(tmp_path)
    result = invoke(db, "prune", "--older-than", "7d")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("pruned 3 terminal tasks finished over 7d ago in 1 batches")
    assert asyncio.run(_left(db)) == {"young-ok", "running"}
    # A day is enough for the younger one; the running one stays whatever its age.
    data = as_json(invoke(db, "prune", "--older-than", "1d", "--json"))
    assert (data["tasks"], data["older_than"], data["dry_run"]) == (1, "1d", False)
    assert asyncio.run(_left(db)) == {"running"}


def test_a_dry_run_counts_and_deletes_nothing(tmp_path: Path) -> None:
    db = _db(tmp_path)
    result = invoke(db, "prune", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == ("would prune 3 terminal tasks finished over 7d ago (dry run)")
    assert asyncio.run(_left(db)) == _ALL


def test_status_name_and_small_batches_narrow_and_split_a_prune(tmp_path: Path) -> None:
    db = _db(tmp_path)
    data = as_json(invoke(db, "prune", "--status", "failed", "--json"))
    assert (data["tasks"], data["statuses"]) == (1, ["failed"])
    data = as_json(invoke(db, "prune", "--name", "report", "--batch", "1", "--json"))
    assert (data["tasks"], data["batches"]) == (1, 2)
    assert asyncio.run(_left(db)) == _ALL - {"old-bad", "old-report"}


def test_prune_by_id_deletes_that_terminal_task(tmp_path: Path) -> None:
    db = _db(tmp_path)
    assert as_json(invoke(db, "prune", "--id", "old-ok", "--json"))["tasks"] == 1
    assert asyncio.run(_left(db)) == _ALL - {"old-ok"}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--id", "running"], "task_id: task 'running' is running, not terminal"),
        (["--id", "young-ok"], "task 'young-ok' finished after the cut"),
        (["--id", "old-ok", "--id", "running"], "'running' is running, not terminal"),
        (["--id", "ghost"], "ghost"),
        (["--older-than", "soon"], "--older-than: 'soon' does not parse as an age"),
        (["--older-than", "-7d"], "--older-than: '-7d' is negative"),
        (["--older-than", "0s"], "--older-than: 0:00:00 is not positive"),
        (["--older-than", "2h"], "--older-than: 2h is shorter than the idempotency window (1d)"),
        (["--status", "running"], "--status: running is not terminal"),
        (["--status", "finished"], "--status: 'finished' is not a status"),
        (["--batch", "0"], "--batch: 0 is not positive"),
        (["--batch", "-5"], "--batch: -5 is not positive"),
        (["--idempotency-window", "x"], "--idempotency-window: 'x' does not parse"),
        (["--name", " "], "--name: an empty task name"),
    ],
)
def test_bad_input_is_refused_in_one_line_and_deletes_nothing(
    tmp_path: Path, args: list[str], problem: str
) -> None:
    db = _db(tmp_path)
    message = assert_one_line_error(invoke(db, "prune", *args))
    assert problem in message, message
    assert asyncio.run(_left(db)) == _ALL


def test_a_shorter_age_is_allowed_once_the_window_is_lowered(tmp_path: Path) -> None:
    db = _db(tmp_path)
    args = ("prune", "--older-than", "2h", "--idempotency-window", "1h", "--json")
    assert as_json(invoke(db, *args))["tasks"] == 4
    assert asyncio.run(_left(db)) == {"running"}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--retention", "2h"], "--retention: 2h is shorter than the idempotency window (1d)"),
        (["--retention", "week"], "--retention: 'week' does not parse as an age"),
        (["--retention-failed", "-3d"], "--retention-failed: '-3d' is negative"),
        (["--retention", "7d", "--retention-failed", "1h"], "--retention-failed: 1h is shorter"),
    ],
)
def test_a_worker_with_bad_retention_refuses_to_start_and_writes_nothing(
    tmp_path: Path, args: list[str], problem: str
) -> None:
    db = tmp_path / "never.db"
    result = invoke(db, "worker", "--tasks", "tests.cli.cli_tasks", *args)
    message = assert_one_line_error(result)
    assert problem in message, message
    assert not db.exists()


def test_worker_retention_flags_become_the_controllers_setting() -> None:
    from chongming.cli.prune_commands import retention_of
    from chongming.stores.retention import Retention

    assert retention_of(None, None) is None
    assert retention_of("7d", "30d") == Retention(
        terminal=timedelta(days=7), failed=timedelta(days=30)
    )
    assert retention_of(None, "30d") == Retention(terminal=None, failed=timedelta(days=30))


async def _family(db: Path) -> None:
    async with SqliteTaskStore(db) as store:
        await store.create(_finished("old-parent", _S.SUCCEEDED, timedelta(days=30)))
        await store.create(_finished("kid", _S.RUNNING, timedelta(days=30)))
        await store.link_child("old-parent", "kid")


def test_a_parent_whose_child_lives_is_kept_and_refused_by_id(tmp_path: Path) -> None:
    db = tmp_path / "family.db"
    asyncio.run(_family(db))
    message = assert_one_line_error(invoke(db, "prune", "--id", "old-parent"))
    assert "task 'old-parent'" in message
    assert "its child 'kid' is running" in message
    data = as_json(invoke(db, "prune", "--json"))
    assert data["tasks"] == 0  # the parent stays while its child runs
    assert asyncio.run(_left(db)) == {"old-parent", "kid"}
