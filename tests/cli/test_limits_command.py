"""``chongming limits``: list, set, and refuse bad input without touching the store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chongming.stores.nodes import NodeInfo
from chongming.stores.sqlite import SqliteTaskStore
from tests.cli.support import as_json, assert_one_line_error, invoke


async def _store_with_a_holder(db: Path) -> None:
    async with SqliteTaskStore(db) as store:
        info = NodeInfo(
            owner="w-1", incarnation="i-1", host="h", pid=1, version="1", num_buckets=64
        )
        await store.register_node(info, ttl_seconds=60)
        await store.declare_cluster_limit("vendor-api", 3)
        assert await store.lease_cluster_slots("vendor-api", "w-1", "i-1", want=2, keep=0) == 2


def test_limits_lists_capacity_held_free_and_holders(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    asyncio.run(_store_with_a_holder(db))
    result = invoke(db, "limits")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "LIMIT       CAPACITY  HELD  FREE  HOLDERS",
        "----------  --------  ----  ----  -------",
        "vendor-api  3         2     1     w-1=2",
    ]
    assert as_json(invoke(db, "limits", "--json")) == {
        "limits": [
            {"name": "vendor-api", "capacity": 3, "held": 2, "free": 1, "holders": {"w-1": 2}}
        ]
    }


def test_limits_set_creates_and_changes_for_the_fleet(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    asyncio.run(_store_with_a_holder(db))
    data = as_json(invoke(db, "limits", "--set", "vendor-api=1", "--set", "db=4", "--json"))
    assert [(d["name"], d["capacity"], d["held"], d["free"]) for d in data["limits"]] == [
        ("db", 4, 0, 4),
        ("vendor-api", 1, 2, 0),  # lowered under what is held: nothing stops, nothing new
    ]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("vendor-api", "is NAME=N"),
        ("=3", "is NAME=N"),
        ("api=three", "whole number"),
        ("api=0", "at least 1"),
        ("a\x01b=2", "control characters"),
        ("x" * 10_000 + "=2", "1 to 200 characters"),
    ],
)
def test_bad_limits_are_refused_in_one_line_and_change_nothing(
    tmp_path: Path, value: str, problem: str
) -> None:
    db = tmp_path / "q.db"
    asyncio.run(_store_with_a_holder(db))
    message = assert_one_line_error(invoke(db, "limits", "--set", value))
    assert problem in message
    assert as_json(invoke(db, "limits", "--json"))["limits"][0]["capacity"] == 3


def test_limits_of_a_missing_database_create_nothing(tmp_path: Path) -> None:
    db = tmp_path / "nothing.db"
    assert "no chongming database" in assert_one_line_error(invoke(db, "limits"))
    assert not db.exists()
