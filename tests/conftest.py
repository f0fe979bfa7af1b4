"""Shared fixtures. Tests run with warnings as errors (see pyproject.toml)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from chongming.policies import ControlWindows

#: Short windows keep control tests fast; every wait still has slack.
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)


@pytest.fixture
def fast_windows() -> ControlWindows:
    return FAST


@pytest.fixture
def release_threads() -> Iterator[list[threading.Event]]:
    """Events a test sets at the end so no abandoned worker thread outlives it."""
    events: list[threading.Event] = []
    yield events
    for event in events:
        event.set()
