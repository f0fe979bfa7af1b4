"""``import chongming.stores`` imports no backend and no driver; names resolve on first use."""

from __future__ import annotations

import json

import pytest

from tests.stores.pg_support import run_script


def test_importing_the_stores_package_imports_no_backend_and_no_driver() -> None:
    result = run_script(
        """
        import json, sys
        import chongming.stores
        before = sorted(
            m for m in sys.modules
            if m.split(".")[0] in ("aiosqlite", "asyncpg")
            or m.startswith(("chongming.stores.memory", "chongming.stores.sqlite",
                             "chongming.stores.postgres"))
        )
        from chongming.stores import Command, InMemoryTaskStore, SqliteTaskStore, TaskStore
        after_sqlite = "aiosqlite" in sys.modules
        print(json.dumps({
            "before": before,
            "names": [Command.__module__, InMemoryTaskStore.__name__,
                      SqliteTaskStore.__name__, TaskStore.__name__],
            "aiosqlite_after_sqlite_store": after_sqlite,
        }))
        """
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["before"] == []
    assert found["names"] == [
        "chongming.stores.nodes",
        "InMemoryTaskStore",
        "SqliteTaskStore",
        "TaskStore",
    ]
    # aiosqlite is needed only to check a caller's connection (enqueue in a transaction).
    assert found["aiosqlite_after_sqlite_store"] is False


def test_an_unknown_name_is_an_attribute_error() -> None:
    import chongming.stores

    with pytest.raises(AttributeError, match="NoSuchStore"):
        chongming.stores.NoSuchStore  # noqa: B018
