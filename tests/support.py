"""Helpers shared by tests (not fixtures)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from chongming import TaskRun, TaskStatus
from chongming.state import audit_history


def assert_sound(run: TaskRun) -> None:
    """The run's snapshot equals the fold of its history, which is a legal path."""
    problems = audit_history(run.snapshot, run.transitions)
    assert problems == [], problems


def trajectory(run: TaskRun) -> list[tuple[str, str, str]]:
    return [(t.from_status.value, t.to_status.value, t.trigger) for t in run.transitions]


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Yield to the loop until ``condition()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.001)


async def wait_status(run: TaskRun, status: TaskStatus, timeout: float = 5.0) -> None:
    await wait_for(lambda: run.status is status, timeout)
