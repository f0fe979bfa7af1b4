"""Turning a :class:`Pipeline` into node runs: every check before anything exists.

The controller calls :func:`prepare_pipeline` with a factory that builds a
:class:`TaskRun` the way its own ``submit`` does (its host, owner, windows,
clock, payload limit), then :meth:`PipelineRun.admit`. A refused pipeline
leaves nothing behind: the runs built so far were never registered.
"""

from __future__ import annotations

from typing import Any, Protocol

from chongming.errors import ChongmingError, ConfigurationError
from chongming.pipeline.graph import Pipeline, check_run_id
from chongming.pipeline.run import PipelineRun
from chongming.run.task_run import TaskRun
from chongming.state.ids import new_task_id
from chongming.task_api.registry import TaskRegistry
from chongming.task_api.spec import TaskSpec

__all__ = ["NodeFactory", "prepare_pipeline"]


class NodeFactory(Protocol):
    """Builds one node's run as the controller builds any run (not yet registered)."""

    def __call__(
        self,
        spec: TaskSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        task_id: str,
        label: str,
    ) -> TaskRun: ...


def prepare_pipeline(
    pipeline: Pipeline,
    registry: TaskRegistry,
    make_run: NodeFactory,
    *,
    run_id: str | None = None,
) -> PipelineRun:
    """Validate ``pipeline`` and build its node runs; raise the first problem found.

    Node task ids are ``<run_id>:<node_id>``; labels ``<pipeline>/<node_id>``,
    so a node is recognisable in ``chongming ps`` and in the store.
    """
    if not isinstance(pipeline, Pipeline):
        raise ConfigurationError(f"submit_pipeline takes a Pipeline, got {type(pipeline).__name__}")
    graph = pipeline.validate(registry)
    run_id = new_task_id() if run_id is None else check_run_id(run_id)
    runs: list[TaskRun] = []
    for node in graph.nodes:
        try:
            runs.append(
                make_run(
                    registry.get(node.task_name),
                    node.args,
                    dict(node.kwargs),
                    task_id=f"{run_id}:{node.node_id}",
                    label=f"{graph.name}/{node.node_id}",
                )
            )
        except ChongmingError as error:
            error.add_note(f"in node {node.node_id!r} of pipeline {graph.name!r}")
            raise
    return PipelineRun(graph, run_id, runs)
