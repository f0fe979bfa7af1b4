"""docs/examples/cluster_limits.py: two workers share one limit, and give its slots back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("cluster_limits.py")
def test_two_workers_never_pass_the_fleet_limit(example: Path) -> None:
    assert_in_order(
        run_example(example),
        [
            "limit vendor-api: capacity 2, held 2",
            "8 of 8 succeeded",
            "peak running across both workers: 2",
            "after both workers closed: held 0",
        ],
    )
