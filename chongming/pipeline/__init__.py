"""DAG pipelines: registered tasks joined by dependencies, run node by node.

Building (:class:`Pipeline`) and its checks, the join and aggregation rules
(pure), and :class:`PipelineRun`, the handle that drives a submitted
pipeline's nodes through the state machine like any task.
"""

from chongming.pipeline.graph import Node as Node
from chongming.pipeline.graph import Pipeline as Pipeline
from chongming.pipeline.graph import PipelineGraph as PipelineGraph
from chongming.pipeline.join import AggregationPolicy as AggregationPolicy
from chongming.pipeline.join import JoinMode as JoinMode
from chongming.pipeline.join import PipelineStatus as PipelineStatus
from chongming.pipeline.records import NodeSnapshot as NodeSnapshot
from chongming.pipeline.records import PipelineOutcome as PipelineOutcome
from chongming.pipeline.records import PipelineSnapshot as PipelineSnapshot
from chongming.pipeline.run import PipelineRun as PipelineRun

__all__ = [
    "AggregationPolicy",
    "JoinMode",
    "Node",
    "NodeSnapshot",
    "Pipeline",
    "PipelineGraph",
    "PipelineOutcome",
    "PipelineRun",
    "PipelineSnapshot",
    "PipelineStatus",
]
