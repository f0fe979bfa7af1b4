"""A prune deletes a task's rows in every table that holds rows of one task.

Read from the migrations themselves, so a new table keyed by ``task_id`` that
is not in :data:`~chongming.stores.retention.TASK_TABLES` fails here before a
prune can leave its rows behind.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from chongming.stores.retention import TASK_TABLES

_TABLE = re.compile(
    r"CREATE TABLE (?:IF NOT EXISTS )?(?:@schema\.)?(\w+)\s*\((.*?)\n\)", re.DOTALL | re.IGNORECASE
)
#: Tables whose rows are not one task's: nodes, limits, the clock, schedules, and tasks itself.
_NOT_PER_TASK = {
    "tasks",
    "nodes",
    "store_clock",
    "cluster_limits",
    "cluster_slots",
    "rate_limits",  # one row per limit and key: no task's
    "rate_grants",
    "schedules",
}


def _tables(dialect: str) -> dict[str, bool]:
    """Every table a dialect's migrations create, with whether it has a task_id column."""
    found: dict[str, bool] = {}
    folder = resources.files("chongming.stores").joinpath("sql")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.startswith(f"{dialect}_"):
            continue
        for name, body in _TABLE.findall(entry.read_text()):
            if name.endswith("_0002"):  # a table rebuilt under a temporary name
                continue
            found[name] = bool(re.search(r"^\s*task_id\s", body, re.MULTILINE))
    return found


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_every_table_with_rows_of_one_task_is_pruned_with_it(dialect: str) -> None:
    tables = _tables(dialect)
    assert "durable_effects" in tables, "the migrations were not read"
    per_task = {name for name, keyed in tables.items() if keyed} - {"tasks"}
    assert per_task == set(TASK_TABLES)
    # PostgreSQL judges leases by the server's clock: it has no store_clock table.
    assert set(tables) - per_task == _NOT_PER_TASK - ({"store_clock"} - set(tables))
    assert {"tasks", "nodes"} <= set(tables)
