"""docs/examples/queued_result.py: one payment's result, the other's TaskFailed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("queued_result.py")
def test_a_result_and_a_task_failed(example: Path) -> None:
    assert_in_order(
        run_example(example),
        [
            "A-1: {'order': 'A-1', 'charged': 2500}",
            "A-2: failed (PermissionError: card declined for 25000 cents)",
        ],
    )
