"""The task module of the worker-operations tests: work to count and a task that logs secrets."""

from __future__ import annotations

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
