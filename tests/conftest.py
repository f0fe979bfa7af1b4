"""Shared fixtures. Tests run with warnings as errors (see pyproject.toml)."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from hypothesis import settings

from chongming.policies import ControlWindows

# CI runs every property test at a fixed seed (a red CI must be reproducible)
# and keeps no example database between runs.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

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


@pytest.fixture(autouse=True)
async def no_leaked_asyncio_tasks(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Fail an async test that leaves asyncio tasks running behind it.

    pytest-asyncio would cancel them quietly when it closes the loop, so a
    component that forgets to own (cancel and await) a task would go unseen.
    A short bounded grace lets tasks that are already ending finish.
    """
    yield
    if not inspect.iscoroutinefunction(request.function):
        return
    current = asyncio.current_task()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2.0
    while True:
        left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        if not left or loop.time() > deadline:
            break
        await asyncio.sleep(0.01)
    assert left == [], f"the test left asyncio tasks running: {left}"
