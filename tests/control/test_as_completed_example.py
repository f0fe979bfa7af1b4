"""docs/examples/as_completed.py: quotes used as they come, the order recorded for replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import run_example


@pytest.mark.example("as_completed.py")
def test_each_quote_is_used_as_it_comes_and_the_order_seen_is_the_order_recorded(
    example: Path,
) -> None:
    lines = run_example(example)
    assert lines[0] == "succeeded"
    heard = [line.removeprefix("heard ") for line in lines if line.startswith("heard ")]
    # Every supplier once, the one that is down as a failed end (not a failed parent).
    assert sorted(heard) == [
        "east: 990",
        "north: 1250",
        "west: failed (west did not answer)",
    ]
    assert "best [990, 'east']" in lines
    recorded = [line for line in lines if line.startswith("recorded order: ")]
    assert len(recorded) == 1
    order = recorded[0].removeprefix("recorded order: ").split(", ")
    assert order == [line.split(":")[0] for line in heard]
