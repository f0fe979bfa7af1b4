"""docs/examples/pipelines_etl.py prints the seed's table and the three endings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("pipelines_etl.py")
def test_the_nightly_etl_shows_blocked_nodes_and_the_three_endings(example: Path) -> None:
    lines = run_example(example)
    assert_in_order(
        lines,
        [
            "== 1. Every node succeeds ==",
            "--- just submitted: the downstream nodes wait in blocked ---",
            "NODE    TASK       STATUS   DEPENDS_ON            JOIN",
            "------  ---------  -------  --------------------  -------------",
            "fetch   fetch      running  -                     all_succeeded",
            "shard0  transform  blocked  fetch                 all_succeeded",
            "shard1  transform  blocked  fetch                 all_succeeded",
            "shard2  transform  blocked  fetch                 all_succeeded",
            "load    load       blocked  shard0,shard1,shard2  all_succeeded",
            "audit   audit      blocked  load                  all_settled",
            "queued 0, holding a slot 1",
            "outcome: succeeded",
            "audit says: loaded 600 rows",
            "task id of load: etl-ok:load",
            "== 2. shard1 fails, aggregation ALL_SETTLED ==",
            "outcome: failed",
            "  load   skipped   by orchestrator:upstream_not_succeeded: upstream 'shard1' failed",
            "audit says: load did not succeed; nothing to reconcile",
            "   pending -> blocked  by orchestrator:waiting_for_dependencies",
            "   blocked -> skipped  by orchestrator:upstream_not_succeeded",
            "== 3. shard1 fails, FAIL_FAST ==",
            "outcome: failed",
            "  load   skipped   by orchestrator:upstream_not_succeeded: upstream 'shard1' failed",
            "  audit  cancelled by orchestrator:fail_fast: node 'shard1' failed",
            "first failure: shard1",
            "== 4. An operator stops the pipeline while the shards run ==",
            "stop issued: True",
            "shard0  transform  stopped    fetch                 all_succeeded",
            "outcome: cancelled",
            "  audit  cancelled by orchestrator:pipeline_cancelled: "
            "the pipeline was stopped: wrong input day",
            "== The three endings side by side ==",
            "NODE    ALL_SETTLED+FAIL  FAIL_FAST+FAIL  STOPPED_BY_HAND",
            "shard1  failed            failed          stopped",
            "load    skipped           skipped         cancelled",
            "audit   succeeded         cancelled       cancelled",
        ],
    )
