"""What the controller facade leans on: argument checks and waiting helpers.

Kept apart so ``controller.py`` holds the facade and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from chongming.errors import ConfigurationError


class Phase:
    """Where a controller is in its life: new, open, closing, closed."""

    NEW = "new"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


__all__ = [
    "all_done",
    "await_to_the_end",
    "let_go",
    "owned_buckets",
    "package_version",
    "wait_left",
    "wait_runs",
    "wind_down",
]


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chongming")
    except PackageNotFoundError:
        return "unknown"


def let_go(run: Any, reason: str) -> None:
    """The store moved on without this node: stop the local carrier, write nothing more."""
    run.shutdown(f"let go: {reason}")


def owned_buckets(owned: Iterable[int] | None, num_buckets: int) -> frozenset[int] | None:
    if owned is None:
        return None
    if isinstance(owned, str):
        raise ConfigurationError("owned_buckets takes bucket numbers; parse strings first")
    result = frozenset(owned)
    for bucket in result:
        if isinstance(bucket, bool) or not isinstance(bucket, int):
            raise ConfigurationError(f"owned bucket numbers are ints, got {bucket!r}")
        if not 0 <= bucket < num_buckets:
            raise ConfigurationError(f"owned bucket {bucket} is outside 0..{num_buckets - 1}")
    if not result:
        raise ConfigurationError("owned_buckets is empty: this node could run nothing")
    return result


async def all_done(runs: list[Any]) -> None:
    """Wait for every run with one future and a countdown (not one await per run)."""
    pending = [run for run in runs if not run.done]
    if not pending:
        return
    finished = asyncio.get_running_loop().create_future()
    remaining = len(pending)

    def count_down(_: Any) -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0 and not finished.done():
            finished.set_result(None)

    for run in pending:
        run.add_done_callback(count_down)
    await asyncio.shield(finished)


async def wait_left(runs: list[Any], seconds: float) -> None:
    """Wait up to ``seconds`` until this node is done with every run: ended or handed back."""
    pending = [left for run in runs if not (left := run.when_left()).done()]
    if pending:
        await asyncio.wait(pending, timeout=seconds)


async def wind_down(runs: list[Any], reason: str, grace: float, bound: float) -> None:
    """Give running ``runs`` ``grace`` seconds, then hand each back (a worker's) or stop it.

    Returns once every one ended or went back, or ``bound`` seconds after that.
    """
    running = [run for run in runs if not run.done and not run.handed_back]
    if running and grace > 0:
        await wait_left(running, grace)
    for run in running:
        if not run.done and not run.handed_back and not run.hand_back(reason):
            run.shutdown(reason)
    await wait_left(running, bound)


async def wait_runs(runs: list[Any], seconds: float) -> None:
    try:
        async with asyncio.timeout(seconds):
            await all_done(runs)
    except TimeoutError:
        return


async def await_to_the_end(task: asyncio.Task[None]) -> None:
    """Await ``task`` even if we are cancelled meanwhile; re-raise the cancellation after."""
    cancelled = False
    # anyio re-delivers a scope's cancellation at every await; its shield stops
    # that, and the loop absorbs a plain asyncio cancel (edge-triggered).
    import anyio  # imported on use: a controller's import stays cheap

    with anyio.CancelScope(shield=True):
        while True:
            try:
                await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                if task.done():
                    break
                cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()
