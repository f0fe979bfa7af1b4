"""docs/examples/pools.py: a payments pool and the rest of the fleet split one queue."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("pools.py")
def test_payments_run_only_in_their_pool(example: Path) -> None:
    assert_in_order(
        run_example(example),
        [
            "orders: order 0 paid, order 1 paid ...",
            "6 of 6 orders done",
            "charge ran on: payments-1",
            "place-order ran on: general-1",
        ],
    )
