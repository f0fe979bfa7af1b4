"""docs/examples/durable_download.py: killed mid-copy, finished by another worker, recorded once."""

from __future__ import annotations

import pytest

from tests.docs.test_examples import EXAMPLES, assert_in_order, run_example

pytestmark = [pytest.mark.example("durable_download.py"), pytest.mark.example("download_tasks.py")]


def test_the_copy_survives_its_worker_and_is_recorded_once() -> None:
    lines = run_example(EXAMPLES / "durable_download.py")
    assert_in_order(
        lines,
        [
            "worker-a killed mid-copy",
            "status succeeded on worker-b, attempt 1",  # a resume continues the attempt
            "  running -> retry_wait by reconcile:lease_expired",
            "  retry_wait -> queued by reconcile:resumed",
            "copy identical: True",
            "business rows: [('dl-1:record-copy', 1310720)]",
        ],
    )
    (chunks,) = [line for line in lines if line.startswith("chunks: ")]
    recorded, by_a, by_b = (int(word) for word in chunks.replace(",", "").split() if word.isdigit())
    assert recorded == 20
    assert by_a >= 1
    assert by_b >= 1
    assert by_a + by_b == 20
