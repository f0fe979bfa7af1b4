"""The task module of the worker-operations tests: work to count and a task that logs secrets."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from chongming import Controller

CANARY = "Cn4ry-0ps-7d1e"


async def double(ctx: Any, value: int) -> int:
    return value * 2


async def leaky(ctx: Any) -> str:
    """Logs a secret every way a careless task would."""
    ctx.log("connecting to postgresql://app:%s@db.internal/orders", CANARY)
    ctx.log("calling https://api.example.com/charge?api_key=%s&amount=3", CANARY)
    ctx.logger.info("with headers", extra={"authorization": f"Bearer {CANARY}"})
    try:
        raise PermissionError(f"token={CANARY} was refused")
    except PermissionError:
        ctx.logger.exception("the charge failed")
    return "done"


def register(controller: Controller) -> None:
    controller.register("double", double)
    controller.register("leaky", leaky)
    register_more(controller)


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _block_until(marker: str, release: str) -> None:
    Path(marker).touch()
    deadline = time.monotonic() + 20
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.01)


async def hold(ctx: Any, release: str) -> str:
    """Runs, checkpointing, until the file ``release`` exists (a stop ends it too)."""
    while not _exists(release):
        await ctx.checkpoint()
        await asyncio.sleep(0.02)
    return "released"


async def block_loop(ctx: Any, marker: str, release: str) -> str:
    """Blocks the worker's event loop (a bug: sync waiting inside ``async def``) until released."""
    _block_until(marker, release)
    return "unblocked"


def register_more(controller: Controller) -> None:
    controller.register("hold", hold)
    controller.register("block_loop", block_loop)
