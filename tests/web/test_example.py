"""docs/examples/dashboard_app.py: the dashboard mounted in a FastAPI app, run as a reader would."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("dashboard_app.py")
def test_the_mounted_dashboard_stops_a_task_and_refuses_a_forged_form(example: Path) -> None:
    lines = run_example(example)
    assert_in_order(
        lines,
        [
            "submitted report-2026-10-02",
            "task page links under /ops: True",
            "stop: 303 /ops/tasks/report-2026-10-02?sent=stop&issued=1",
            "history: running -> stopping by dashboard - demo over",
            "metrics: chongming_transitions_total present",
            "without the CSRF token: 403",
        ],
    )


@pytest.mark.example("dashboard_durable.py")
def test_the_durable_example_shows_the_journal_charts_and_search(example: Path) -> None:
    lines = run_example(example)
    assert_in_order(
        lines,
        [
            "status succeeded",
            "journal: run step effect fact-wait fact-sent run fact-decided",
            "parked while waiting: True",
            "ends in the last hour: 1",
            "found by key: ['import-orders']",
            "bad from: 400 from is not a date and time",
        ],
    )
