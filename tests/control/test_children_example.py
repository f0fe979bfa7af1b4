"""docs/examples/children.py: the order's charge as a child task, shipments fanned out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("children.py")
def test_the_charge_is_a_child_and_the_shipments_a_fan_out(example: Path) -> None:
    assert_in_order(
        run_example(example),
        [
            "succeeded {'order': 'A-1', 'receipt': 'receipt A-1', "
            "'labels': ['label A-1/mug', 'label A-1/tea']}",
            "succeeded {'order': 'A-2', 'declined': 'card declined for 250.00'}",
            "children of A-1: charge, ship-item, ship-item",
            "parent named by each: True",
        ],
    )
