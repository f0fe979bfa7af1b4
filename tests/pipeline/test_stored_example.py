"""docs/examples/stored_pipeline.py: the nightly ETL on the shared plane, twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("stored_pipeline.py")
def test_the_nightly_etl_runs_on_two_workers_and_fails_fast_on_a_bad_shard(
    example: Path,
) -> None:
    assert_in_order(
        run_example(example),
        [
            "night-1 chongming:pipeline succeeded",
            "  fetch   succeeded  night-1:fetch",
            "  load    succeeded  night-1:load",
            "  load = 36",  # (3 + 1 + 2) * (1 + 2 + 3): fetch's rows reached every shard
            "  audit: audited: load",
            "night-2 failed",
            "  pipeline 'night-2' ended failed: node 'shard1' failed (fetch succeeded, "
            "shard0 succeeded, shard1 failed, shard2 succeeded, load skipped, audit cancelled)",
            "parent of night-1:load: night-1",
            "never enqueued in night-2: load, audit",
        ],
    )
