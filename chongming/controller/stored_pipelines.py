"""A pipeline on the shared plane: a durable coordinator task whose children are the nodes.

``controller.enqueue_pipeline`` stores the graph as the arguments of one
task, :data:`PIPELINE_TASK`, that every worker serves. Its body is plain
durable code: it spawns the nodes whose joins hold as children
(``<run_id>:<node_id>``, any worker may run them), takes their ends with
``ctx.as_completed`` and judges the rest with the same pure rules as the
in-process pipeline (:mod:`chongming.pipeline.join`). Every decision is
therefore in its journal: a coordinator whose worker died is claimed again
and replays to where it was, spawning nothing twice and waiting for nothing
it has seen end.

A node's upstream results travel as a fact (:data:`UPSTREAM_FACT`) written
in the node's enqueue transaction; the worker that claims a node (tagged
:data:`NODE_TAG`) reads it into ``ctx.upstream``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from chongming.errors import ChongmingError, TaskCancelled
from chongming.pipeline.graph import PipelineGraph
from chongming.pipeline.join import (
    AggregationPolicy,
    JoinMode,
    JoinVerdict,
    fails_fast,
    judge_join,
    pipeline_status,
)
from chongming.plane.outages import through_outages
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.nodes import CommandKind, CommandState
from chongming.task_api.journal import ChildEnd, ChildHandle

__all__ = [
    "COORDINATOR_RESUMES",
    "NODE_TAG",
    "PIPELINE_TASK",
    "UPSTREAM_FACT",
    "PipelineNotSucceeded",
    "coordinate",
    "graph_to_json",
    "node_inputs",
]

#: The coordinator's registered name: every worker serves it.
PIPELINE_TASK = "chongming:pipeline"
#: The tag of a stored pipeline's node: its claim reads :data:`UPSTREAM_FACT`.
NODE_TAG = "chongming:pipeline-node"
#: The fact a node starts with: its succeeded upstreams' results, by node id.
UPSTREAM_FACT = "pipeline:upstream"
#: A coordinator's attempts lost with their worker, resumed (a resume replays decisions
#: only: it costs reads, and no node runs again), before it is judged lost for good.
COORDINATOR_RESUMES = 100
#: How long a coordinator that found its stop command waits for it to arrive (seconds).
STOP_ARRIVES = 30.0
_CALLED_OFF = frozenset({"stopped", "cancelled"})


class PipelineNotSucceeded(ChongmingError):
    """A stored pipeline ended ``failed`` or ``cancelled``: its coordinator task fails with it.

    The message names the node whose failure decided it and every node's
    end, so ``chongming status <run_id>`` tells the whole story.
    """

    def __init__(self, run_id: str, status: str, first_failure: str | None, ends: str) -> None:
        self.run_id = run_id
        self.status = status
        self.first_failure = first_failure
        why = f": node {first_failure!r} failed" if first_failure else ""
        super().__init__(f"pipeline {run_id!r} ended {status}{why} ({ends})")


async def node_inputs(store: TaskStore, stored: TaskSnapshot) -> dict[str, Any] | None:
    """A claimed node's ``ctx.upstream`` (its enqueue wrote it), or ``None`` for any other task."""
    if NODE_TAG not in stored.tags:
        return None
    fact = await through_outages(lambda: store.get_fact(stored.task_id, UPSTREAM_FACT))
    payload = None if fact is None else fact.payload
    return dict(payload) if isinstance(payload, dict) else {}


def graph_to_json(graph: PipelineGraph) -> dict[str, Any]:
    """The coordinator's argument: the validated graph as JSON."""
    return {
        "name": graph.name,
        "aggregation": graph.aggregation.value,
        "nodes": [
            {
                "id": node.node_id,
                "task": node.task_name,
                "args": list(node.args),
                "kwargs": dict(node.kwargs),
                "depends_on": list(node.depends_on),
                "join": node.join.value,
            }
            for node in graph.nodes
        ],
    }


class _Progress:
    """What the coordinator knows: which nodes ended how, which run, which never will."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.nodes: list[Mapping[str, Any]] = list(spec["nodes"])
        self.fail_fast = AggregationPolicy(spec["aggregation"]) is AggregationPolicy.FAIL_FAST
        self.ended: dict[str, str] = {}  # node id -> its status (skipped/cancelled: never enqueued)
        self.results: dict[str, Any] = {}
        self.task_ids: dict[str, str] = {}
        self.running: dict[str, ChildHandle] = {}
        self.first_failure: str | None = None

    def waiting(self) -> list[Mapping[str, Any]]:
        return [n for n in self.nodes if n["id"] not in self.ended and n["id"] not in self.running]

    def verdict(self, node: Mapping[str, Any]) -> JoinVerdict:
        upstream = node["depends_on"]
        settled = [self.ended[u] for u in upstream if u in self.ended]
        succeeded = sum(status == "succeeded" for status in settled)
        return judge_join(
            JoinMode(node["join"]), total=len(upstream), succeeded=succeeded, settled=len(settled)
        )

    def upstream_of(self, node: Mapping[str, Any]) -> dict[str, Any]:
        return {u: self.results[u] for u in node["depends_on"] if self.ended.get(u) == "succeeded"}

    def took(self, node_id: str, end: ChildEnd) -> None:
        del self.running[node_id]
        self.ended[node_id] = end.status
        if end.ok:
            self.results[node_id] = end.value
        if self.first_failure is None and fails_fast(_status(end.status)):
            self.first_failure = node_id

    def summary(self) -> str:
        return ", ".join(f"{n['id']} {self.ended.get(n['id'], 'unknown')}" for n in self.nodes)


async def coordinate(ctx: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """The body of :data:`PIPELINE_TASK`: release, wait, judge, until every node ended."""
    progress = _Progress(spec)
    await _release(ctx, spec, progress)
    while progress.running:
        end: ChildEnd | None = None
        by_task = {handle.task_id: node for node, handle in progress.running.items()}
        async with contextlib.aclosing(ctx.as_completed(*progress.running.values())) as ends:
            async for end in ends:
                progress.took(by_task[end.task_id], end)
                break  # judge now: the next as_completed gives the rest of this batch at once
        if end is not None and end.status in _CALLED_OFF:
            await _unless_stopping(ctx)
        await _release(ctx, spec, progress)
    statuses = [_status(status) for status in progress.ended.values()]
    failed = progress.first_failure is not None
    status = pipeline_status(statuses, failure_seen=failed, stopped=False)
    if status.value != "succeeded":
        raise PipelineNotSucceeded(
            ctx.task_id, status.value, progress.first_failure, progress.summary()
        )
    return {
        "run_id": ctx.task_id,
        "name": spec["name"],
        "status": status.value,
        "nodes": {
            node_id: {"status": ended, "task_id": progress.task_ids.get(node_id)}
            for node_id, ended in progress.ended.items()
        },
        "results": progress.results,
    }


async def _release(ctx: Any, spec: Mapping[str, Any], progress: _Progress) -> None:
    """Skip what can never run, call off what fail-fast forbids, spawn what may run, in order."""
    changed = True
    while changed:
        changed = False
        for node in progress.waiting():
            verdict = progress.verdict(node)
            if verdict is JoinVerdict.UNSATISFIABLE:
                progress.ended[node["id"]] = "skipped"
                changed = True
            elif progress.fail_fast and progress.first_failure is not None:
                continue  # called off below, once every skip is known
            elif verdict is JoinVerdict.READY:
                await _spawn(ctx, spec, progress, node)
    if progress.fail_fast and progress.first_failure is not None:
        for node in progress.waiting():
            progress.ended[node["id"]] = "cancelled"


async def _unless_stopping(ctx: Any) -> None:
    """Raise TaskCancelled if a stop of this coordinator is on its way, once it arrived.

    A stop of the pipeline stops its parked nodes at once, in the store, and
    reaches the coordinator itself as a command a moment later: a node seen
    ``stopped`` in between must not be judged as one a person stopped alone
    (its ``all_settled`` dependents would run after the pipeline was stopped).
    """
    await ctx.checkpoint()  # here already
    store = ctx.journal.store
    records = await through_outages(lambda: store.command_records(task_id=ctx.task_id, limit=20))
    if not any(
        record.command.kind is CommandKind.STOP and record.state is not CommandState.DONE
        for record in records
    ):
        return
    for _ in range(int(STOP_ARRIVES / 0.05)):
        await ctx.checkpoint()  # raises TaskCancelled once the command is here
        await asyncio.sleep(0.05)


async def _spawn(
    ctx: Any, spec: Mapping[str, Any], progress: _Progress, node: Mapping[str, Any]
) -> None:
    node_id = str(node["id"])
    if ctx.stop_requested:  # as ctx.spawn: nothing new starts once a stop has arrived
        raise TaskCancelled(f"task {ctx.task_id!r} was asked to stop")
    options = {
        "task_id": f"{ctx.task_id}:{node_id}",
        "label": f"{spec['name']}/{node_id}",
        "tags": [NODE_TAG],
        "facts": {UPSTREAM_FACT: progress.upstream_of(node)},
    }
    handle = await ctx.journal.spawn(
        node["task"], tuple(node["args"]), dict(node["kwargs"]), None, options
    )
    progress.running[node_id] = handle
    progress.task_ids[node_id] = handle.task_id


def _status(value: str) -> TaskStatus:
    try:
        return TaskStatus(value)
    except ValueError:
        return TaskStatus.LOST  # an end nobody can read is an end nobody can know
