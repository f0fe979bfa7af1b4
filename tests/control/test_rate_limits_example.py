"""docs/examples/rate_limits.py: two workers share one rate, and untagged work runs beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("rate_limits.py")
def test_two_workers_start_no_more_than_the_fleet_rate(example: Path) -> None:
    assert_in_order(
        run_example(example),
        [
            "rate limit payment-vendor: 5/s",
            "11 of 11 payments succeeded",
            "4 of 4 reports succeeded",
            "every report started before the 6th payment: yes",
            "payment starts in any one second: at most 6",
            "11 starts spread over about 2 s: yes",
        ],
    )
