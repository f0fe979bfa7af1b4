"""The handle of a stored pipeline run: its coordinator task, its nodes, its graph, a stop.

``controller.enqueue_pipeline`` returns one, and ``controller.stored_pipeline(run_id)``
makes one in any process that opens the store. It is the coordinator's
:class:`QueuedTask` (``wait``, ``result``, ``get``) with what the in-process
:class:`~chongming.pipeline.run.PipelineRun` offers beside it: a node by id,
the whole run as a graph, and a stop of the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from chongming.controller.queued import QueuedTask
from chongming.errors import ConfigurationError
from chongming.plane.outages import through_outages
from chongming.state.records import TaskSnapshot

if TYPE_CHECKING:
    from chongming.controller.pipeline_view import PipelineView
    from chongming.stores.base import TaskStore

__all__ = ["StoredPipeline"]

Stop = Callable[..., Awaitable[bool]]


class StoredPipeline(QueuedTask):
    """A stored pipeline run (docs/pipelines.md, "On the shared plane")."""

    __slots__ = ("_stop", "node_ids")

    def __init__(
        self,
        store: TaskStore,
        snapshot: TaskSnapshot,
        *,
        created: bool,
        poll: float,
        stop: Stop,
    ) -> None:
        super().__init__(store, snapshot, created=created, poll=poll)
        self._stop = stop
        graph = snapshot.args[0] if snapshot.args else {}
        nodes = graph.get("nodes", []) if isinstance(graph, dict) else []
        #: The graph's node ids, in its order.
        self.node_ids: tuple[str, ...] = tuple(
            str(node["id"]) for node in nodes if isinstance(node, dict)
        )

    async def node(self, node_id: str) -> QueuedTask | None:
        """The node's task, or ``None`` while (or if ever) the coordinator has not enqueued it."""
        if node_id not in self.node_ids:
            raise ConfigurationError(
                f"pipeline {self.task_id!r} has no node {node_id!r}; its nodes: "
                f"{', '.join(self.node_ids)}"
            )
        task_id = f"{self.task_id}:{node_id}"
        found = await through_outages(lambda: self._store.get(task_id))
        if found is None:
            return None
        return QueuedTask(self._store, found, created=False, poll=self._poll)

    async def view(self) -> PipelineView:
        """The run as a graph, each node with its status (``chongming pipelines <run_id>``)."""
        from chongming.controller.pipeline_view import pipeline_view

        return await pipeline_view(self._store, self.task_id)

    async def stop(self, *, reason: str | None = None) -> bool:
        """Stop the run: the coordinator, and by the child cascade every unfinished node.

        False if the coordinator had already ended.
        """
        return await self._stop(self.task_id, reason=reason)

    def __repr__(self) -> str:
        return f"<StoredPipeline {self.task_id!r} nodes={len(self.node_ids)}>"
