"""docs/examples/schedules.py: the fall-back night, a refused Feb 30, two workers firing once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_examples import assert_in_order, run_example


@pytest.mark.example("schedules.py")
def test_the_schedules_example_fires_each_tick_once(example: Path) -> None:
    assert_in_order(
        run_example(example),
        [
            "nightly_report: at 02:30 every day (Europe/Berlin)",
            "  fires 2026-10-24 02:30 CEST",
            "  fires 2026-10-25 02:30 CEST",
            "  fires 2026-10-26 02:30 CET",
            "refused (cron): schedule cron: '0 0 30 2 *' names a date that never comes"
            " (e.g. Feb 30): it never fires",
            "heartbeat: every 0.2 seconds, catch-up all",
            "schedule heartbeat: paused",
            "schedule nightly_report: active",
            "each tick once: True",
            "no tick skipped: True",
        ],
    )
