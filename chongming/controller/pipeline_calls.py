"""Pipelines submitted to a controller: the DAG's nodes as runs of its host.

A mixin of :class:`~chongming.controller.Controller` (one idea per module).
"""

from __future__ import annotations

import asyncio
from typing import Any

from chongming.control.plane import ControlPlane
from chongming.controller.host import ControllerHost
from chongming.controller.run_factory import RunFactory
from chongming.controller.support import await_to_the_end
from chongming.pipeline.graph import Pipeline
from chongming.pipeline.run import LivePipelines, PipelineRun
from chongming.pipeline.submit import prepare_pipeline
from chongming.run.task_run import TaskRun
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import TaskSpec, durable_needs_store

__all__ = ["PipelineCalls"]


class PipelineCalls:
    """:meth:`submit_pipeline`; see the module docstring."""

    _host: ControllerHost
    _plane: ControlPlane | None
    _pipelines: LivePipelines
    registry: TaskRegistry
    run_factory: RunFactory

    async def _open(self) -> None:
        raise NotImplementedError  # the controller's

    async def submit_pipeline(
        self, pipeline: Pipeline, *, run_id: str | None = None
    ) -> PipelineRun:
        """Start ``pipeline``: its roots ``queued``, every other node ``blocked``.

        Everything is checked before any node exists (the graph, the task
        names, each node's arguments, ids in use); node task ids are
        ``<run_id>:<node_id>`` (``run_id`` defaults to a fresh random id).
        With a store it returns once every node is durable; if one cannot
        be stored, the stored ones are cancelled and the store's error is
        raised. Cancellation: as for :meth:`submit`, the admission is
        finished first; an admitted pipeline runs, and the cancellation is
        re-raised.
        """
        await self._open()
        handle = prepare_pipeline(pipeline, self.registry, self._node_run, run_id=run_id)
        plane = self._plane
        if plane is not None:
            await plane.become_node()
        admission = asyncio.get_running_loop().create_task(
            handle.admit(self._host, None if plane is None else plane.writer, self._pipelines),
            name=f"chongming:admit-pipeline:{handle.run_id}",
        )
        await await_to_the_end(admission)
        return handle

    def _node_run(
        self,
        spec: TaskSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        task_id: str,
        label: str,
    ) -> TaskRun:
        if spec.durable and self._plane is None:
            raise durable_needs_store(spec.name, "this controller")
        return self.run_factory.new(
            spec, args, kwargs, task_id=task_id, name=spec.name, label=label
        )
