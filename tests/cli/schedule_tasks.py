"""Task module of the schedule proof: ``--tasks tests.cli.schedule_tasks``."""

from __future__ import annotations

from chongming import Controller, TaskContext


def tick(ctx: TaskContext) -> str:
    return ctx.task_id


def register(controller: Controller) -> None:
    controller.register("tick", tick)
