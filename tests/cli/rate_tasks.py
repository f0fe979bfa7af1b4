"""Task module of the rate-limit process test: ``--tasks tests.cli.rate_tasks``."""

from __future__ import annotations

from chongming import Controller, TaskContext


async def call_vendor(ctx: TaskContext) -> str:
    await ctx.checkpoint()
    return ctx.task_id


async def plain(ctx: TaskContext) -> str:
    return ctx.task_id


def register(controller: Controller) -> None:
    controller.register("call_vendor", call_vendor, tags=("vendor-api",))
    controller.register("plain", plain)
