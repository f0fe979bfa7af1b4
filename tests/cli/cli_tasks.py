"""The task module the CLI tests pass with ``--tasks tests.cli.cli_tasks``."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

from chongming import Controller, ExponentialBackoff, RetryPolicy, TaskContext

#: Released by the in-process tests that run ``deaf`` (it never checkpoints).
DEAF_RELEASE = threading.Event()


async def double(ctx: TaskContext, value: int) -> int:
    return value * 2


async def echo(ctx: TaskContext, **kwargs: Any) -> dict[str, Any]:
    return kwargs


def steps(ctx: TaskContext, count: int = 3, seconds: float = 0.05) -> int:
    for index in range(count):
        ctx.progress(index, total=count, unit="steps", message=f"step {index}")
        ctx.checkpoint()
        time.sleep(seconds)
    ctx.progress(count, total=count, unit="steps", message="done")
    return count


async def loops(ctx: TaskContext) -> None:
    beats = 0
    while True:
        await ctx.checkpoint()
        beats += 1
        ctx.progress(beats, unit="beats", message="looping")
        await asyncio.sleep(0.02)


def deaf(ctx: TaskContext, seconds: float = 60) -> None:
    """A thread that never checkpoints: only a forced stop ends its wait (as lost)."""
    ctx.progress(0, unit="naps", message="not listening")
    DEAF_RELEASE.wait(seconds)


def mark(ctx: TaskContext, ledger: str, key: str, seconds: float = 0.0) -> str:
    """Append ``key`` to ``ledger`` (one O_APPEND write: whole lines, even across processes)."""
    if seconds:
        time.sleep(seconds)
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
    return key


async def boom(ctx: TaskContext) -> None:
    raise ValueError("boom from the task")


def register(controller: Controller) -> None:
    controller.register("double", double, tags={"math"})
    controller.register("echo", echo)
    controller.register("steps", steps, tags={"etl", "slow"})
    controller.register("loops", loops)
    controller.register("deaf", deaf)
    controller.register("mark", mark)
    controller.register("versioned", double, version=1)
    controller.register("versioned", echo, version=2)
    retry = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(base=0.01))
    controller.register("boom", boom, retry=retry)
