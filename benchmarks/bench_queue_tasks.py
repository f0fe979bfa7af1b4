"""The task module the worker processes of ``bench_queue.py`` serve."""

from __future__ import annotations

from typing import Any


async def trivial(ctx: Any) -> int:
    return 1


def register(controller: Any) -> None:
    controller.register("trivial", trivial)
