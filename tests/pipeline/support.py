"""Node functions whose end the test decides, and that record what they saw."""

from __future__ import annotations

import asyncio
from typing import Any

from chongming import Controller, TaskStatus
from chongming.pipeline import PipelineRun


def node_of(task_id: str) -> str:
    return task_id.partition(":")[2]


class Gates:
    """``gated`` parks each node until :meth:`release`; then it returns or raises.

    It records the order nodes entered their function and the upstream
    mapping each one was given. ``outcome`` is ``"succeed"`` (the result is
    the node id) or ``"fail"``.
    """

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self.entered: list[str] = []
        self.upstream: dict[str, dict[str, Any]] = {}

    def _event(self, node_id: str) -> asyncio.Event:
        event = self._events.get(node_id)
        if event is None:
            event = self._events[node_id] = asyncio.Event()
        return event

    def release(self, *node_ids: str) -> None:
        for node_id in node_ids:
            self._event(node_id).set()

    async def gated(self, ctx: Any, outcome: str = "succeed") -> str:
        node_id = node_of(ctx.task_id)
        self.entered.append(node_id)
        self.upstream[node_id] = dict(ctx.upstream)
        await self._event(node_id).wait()
        await ctx.checkpoint()  # a stop requested meanwhile takes effect here
        if outcome == "fail":
            raise RuntimeError(f"{node_id} failed on purpose")
        return node_id

    def register(self, controller: Controller) -> None:
        controller.register("gated", self.gated)


async def echo(ctx: Any, value: Any = None) -> Any:
    await ctx.checkpoint()
    return value


async def boom(ctx: Any) -> None:
    await ctx.checkpoint()
    raise ValueError("boom")


async def wait_until(condition: Any, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)


def statuses(run: PipelineRun) -> dict[str, str]:
    return {node.node_id: node.status.value for node in run.snapshot().nodes}


def path(run: Any) -> list[tuple[str, str, str]]:
    """(from, to, trigger) of each transition of a node's run."""
    return [(t.from_status.value, t.to_status.value, t.trigger) for t in run.transitions]


RUNNING = TaskStatus.RUNNING
