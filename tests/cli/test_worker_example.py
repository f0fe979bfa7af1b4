"""docs/examples/worker_operations.py: a real worker process, operated as the page shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("worker_operations.py")
def test_the_operator_sees_settings_readiness_metrics_and_a_masked_key(example: Path) -> None:
    lines = run_example(example)
    assert_in_order(
        lines,
        [
            "worker resizer-1 serves ['resize'], max_parallel 2, lease_ttl 10s",
            "readyz: 200 lease held",
            "results: ['cat-0.png@2x', 'cat-1.png@2x', 'cat-2.png@2x']",
            "metrics: chongming_worker_claims_total 3",
            "metrics: chongming_worker_ends_total 3",
            "metrics: chongming_worker_slots_free 2",
            "worker exited 0: worker resizer-1 stopped",
            "task log: calling https://img.example.com/resize?api_key=***&image=***",
            "the key in any log line: False",
        ],
    )
