"""Pipelines submitted to a controller (the DAG's nodes as runs of its host) or enqueued.

A mixin of :class:`~chongming.controller.Controller` (one idea per module).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from chongming.controller.host import ControllerHost
from chongming.controller.queued import QueuedTask
from chongming.controller.run_factory import RunFactory
from chongming.controller.stored_handle import StoredPipeline
from chongming.controller.support import await_to_the_end
from chongming.errors import ChongmingError, ConfigurationError, TaskNotFound, UnknownTask
from chongming.pipeline.graph import Pipeline, check_run_id
from chongming.pipeline.run import LivePipelines, PipelineRun
from chongming.pipeline.submit import prepare_pipeline
from chongming.run.task_run import TaskRun
from chongming.state.ids import new_task_id
from chongming.state.records import TaskSnapshot
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import TaskSpec, durable_needs_store

if TYPE_CHECKING:
    from chongming.controller.served import ServedVersions
    from chongming.plane.plane import ControlPlane

__all__ = ["PipelineCalls"]


class PipelineCalls:
    """:meth:`submit_pipeline` and :meth:`enqueue_pipeline`; see the module docstring."""

    _host: ControllerHost
    _plane: ControlPlane | None
    _pipelines: LivePipelines
    _served: ServedVersions | None
    registry: TaskRegistry
    run_factory: RunFactory

    async def _open(self) -> None:
        raise NotImplementedError  # the controller's

    if TYPE_CHECKING:  # EnqueueCalls' and the controller's
        poll_interval: float

        async def enqueue(self, name: str, *args: Any, **kwargs: Any) -> QueuedTask: ...

        def _require_plane(self, what: str) -> ControlPlane: ...

        async def stop(
            self, task_id: str, *, reason: str | None = None, actor: str = "user"
        ) -> bool: ...

    async def enqueue_pipeline(
        self, pipeline: Pipeline, *, run_id: str | None = None
    ) -> StoredPipeline:
        """Run ``pipeline`` on the shared plane: a coordinator task any worker may take.

        The graph is stored as the arguments of one durable task
        (``chongming:pipeline``, task id ``run_id``); it enqueues each node as
        its child ``<run_id>:<node_id>`` once the node's join holds, and a
        coordinator whose worker dies resumes on another (docs/pipelines.md).
        Checked before anything is written: the graph, and each node's task
        name: registered here (then its arguments are checked against its
        function) or served by a live worker, else :class:`UnknownTask`.
        The handle (:class:`StoredPipeline`: the coordinator's
        :class:`QueuedTask`, its nodes, its graph, a stop) has the outcome as
        its result; a pipeline that did not succeed fails its coordinator
        with :class:`PipelineNotSucceeded`.
        """
        await self._open()
        if not isinstance(pipeline, Pipeline):
            raise ConfigurationError(
                f"enqueue_pipeline takes a Pipeline, got {type(pipeline).__name__}"
            )
        graph = pipeline.validate()
        run_id = new_task_id() if run_id is None else check_run_id(run_id)
        for node in graph.nodes:
            try:
                await self._check_served(node.task_name, node.args, dict(node.kwargs))
            except ChongmingError as error:
                error.add_note(f"in node {node.node_id!r} of pipeline {graph.name!r}")
                raise
        from chongming.controller.stored_pipelines import PIPELINE_TASK, graph_to_json

        queued = await self.enqueue(
            PIPELINE_TASK, graph_to_json(graph), task_id=run_id, label=graph.name
        )
        return self._stored(queued.snapshot, created=queued.created)

    async def stored_pipeline(self, run_id: str) -> StoredPipeline:
        """The handle of the stored pipeline ``run_id``, from any process on its store.

        :class:`TaskNotFound` for an unknown id; ``ConfigurationError`` for a
        task that is not a stored pipeline.
        """
        await self._open()
        store = self._require_plane("stored_pipeline").store
        found = await store.get(check_run_id(run_id))
        if found is None:
            raise TaskNotFound(run_id)
        from chongming.controller.stored_pipelines import PIPELINE_TASK

        if found.name != PIPELINE_TASK:
            raise ConfigurationError(
                f"task {run_id!r} is a {found.name!r} task, not a stored pipeline"
            )
        return self._stored(found, created=False)

    def _stored(self, snapshot: TaskSnapshot, *, created: bool) -> StoredPipeline:
        store = self._require_plane("enqueue_pipeline").store
        return StoredPipeline(
            store, snapshot, created=created, poll=self.poll_interval, stop=self.stop
        )

    async def _check_served(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if name in self.registry:
            self.registry.get(name).bind_check(args, kwargs)
            return
        if self._served is not None and await self._served.serves(name):
            return
        error = UnknownTask(name, tuple(self.registry.names))
        error.add_note(
            "no live worker serves it and it is not registered here: start a worker that "
            "registers it (the pipeline would wait for one forever)"
        )
        raise error

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
