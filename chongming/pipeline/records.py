"""What a running pipeline reports: frozen records, built when asked."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from chongming.pipeline.join import AggregationPolicy, JoinMode, PipelineStatus
from chongming.run.outcome import Outcome
from chongming.state.status import TaskStatus

__all__ = ["NodeSnapshot", "PipelineOutcome", "PipelineSnapshot"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodeSnapshot:
    """One node now: its task, status, dependencies, and the last transition's cause."""

    node_id: str
    task_id: str
    name: str  # the registered task name
    status: TaskStatus
    depends_on: tuple[str, ...]
    join: JoinMode
    trigger: str
    reason: str | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelineSnapshot:
    """A pipeline now: ``running`` until every node has ended, then its outcome."""

    run_id: str
    name: str
    aggregation: AggregationPolicy
    status: PipelineStatus
    nodes: tuple[NodeSnapshot, ...]

    def node(self, node_id: str) -> NodeSnapshot | None:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        return None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelineOutcome:
    """How a pipeline ended, with each node's own outcome.

    ``first_failure`` names the node whose failure decided ``failed`` (under
    ``FAIL_FAST``, the one that called the rest off).
    """

    run_id: str
    name: str
    status: PipelineStatus
    nodes: Mapping[str, Outcome]
    first_failure: str | None

    @property
    def ok(self) -> bool:
        return self.status is PipelineStatus.SUCCEEDED

    def value(self, node_id: str) -> object:
        """The result of a node that succeeded (``None`` for any other)."""
        return self.nodes[node_id].value
