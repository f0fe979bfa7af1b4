"""docs/examples/durable_steps.py: a retry replays the steps the first attempt finished."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("durable_steps.py")
def test_the_retry_replays_two_steps_and_runs_the_third(example: Path) -> None:
    assert_in_order(
        run_example(example),
        [
            "status succeeded after 2 attempts: {'digest': 'sha256:00001000', 'stored': 4096}",
            "step bodies that ran: download https://example.test/a.bin, checksum,"
            " download https://example.test/a.bin#copy",
            "recorded steps: download@epoch1, checksum@epoch1, store@epoch2",
        ],
    )
