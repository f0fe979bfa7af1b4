"""Shared fixtures. Tests run with warnings as errors (see pyproject.toml)."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from chongming.policies import ControlWindows
from tests import tiers

# CI runs every property test at a fixed seed (a red CI must be reproducible)
# and keeps no example database between runs; the fast tier (make test-fast)
# runs a fifth of the examples (tests/tiers.py).
_PROFILE: dict[str, Any] = {}
if os.environ.get("CI"):
    _PROFILE.update(derandomize=True, database=None, deadline=None)
if tiers.FAST:
    _PROFILE.update(max_examples=tiers.examples(100))
if _PROFILE:
    settings.register_profile("chongming", **_PROFILE)
    settings.load_profile("chongming")

#: Short windows keep control tests fast; every wait still has slack.
FAST = ControlWindows(stop_grace=0.3, cancel_window=0.3, pause_window=0.5)


EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


@pytest.fixture
def example(request: pytest.FixtureRequest) -> Path:
    """The file of docs/examples/ named by the test's ``example`` mark.

    The mark is both what the test runs and what ``test_examples.py`` counts
    as coverage, so a test cannot claim an example it does not run.
    """
    mark = request.node.get_closest_marker("example")
    assert mark is not None, "mark the test with @pytest.mark.example('<file>.py')"
    path = EXAMPLES / str(mark.args[0])
    assert path.is_file(), f"no example {path}"
    return path


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


#: How long threads a test started may take to end once it is over.
THREAD_GRACE = 2.0
_THREADS_BEFORE = pytest.StashKey[set[threading.Thread]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Escape lone surrogates in captured output before a report leaves its process.

    Tests feed hostile text (``"\\udcff"``) through code that logs it, and
    pytest-xdist's wire cannot carry a lone surrogate: the worker would die
    sending the report (``make test`` runs in several processes). Escaped the
    way a terminal shows them, nothing is lost.
    """
    report.sections = [(name, _printable(content)) for name, content in report.sections]


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_THREADS_BEFORE] = set(threading.enumerate())
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Fail a test that leaves threads running behind it.

    Counted once every fixture of the test is torn down: its event loop is
    closed (the default executor joined) and the ``release_threads`` events
    are set. A short bounded grace lets threads that are already ending
    finish; nothing is exempt — a pool that outlives the test that started it
    is a leak to fix where the pool lives.
    """
    result = yield
    before = item.stash.get(_THREADS_BEFORE, None)
    if before is None:
        return result
    deadline = time.monotonic() + THREAD_GRACE
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [thread for thread in threading.enumerate() if thread not in before]
    assert left == [], f"the test left threads running: {left}"
    return result


@pytest.fixture(autouse=True)
async def asyncio_debug_mode(request: pytest.FixtureRequest) -> None:
    """Every test loop runs in debug mode (``asyncio_debug`` in pyproject.toml)...

    ...except under load tests (``slow``): debug mode records a stack for
    every handle and task, which turns ten thousand tasks from seconds into
    minutes and measures the debugger, not the runtime.
    """
    loop = asyncio.get_running_loop()
    if request.node.get_closest_marker("slow") is not None:
        loop.set_debug(False)
    else:
        assert loop.get_debug(), "asyncio_debug = true is missing from pyproject.toml"


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
