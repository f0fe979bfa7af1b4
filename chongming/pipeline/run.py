"""``PipelineRun``: a submitted pipeline — the handle, and the driver of its nodes.

Every node is an ordinary :class:`TaskRun` held by the controller, so each of
its steps goes through the state machine and the controller's ``record``
seam (counted, written through to the store, audited). The pipeline only
decides *which* step a node takes next, with the pure rules of
:mod:`chongming.pipeline.join`:

- a node whose join holds goes ``blocked -> queued`` (into admission, with its
  upstream results); until then it is not in the queue and holds no slot;
- a node whose join can no longer hold goes ``blocked -> skipped``, the
  reason naming the upstream;
- under ``FAIL_FAST`` a failed or lost node calls off every node that has not
  started: ``cancelled`` (trigger ``orchestrator:fail_fast``). A node already
  started is left to end as it will: the state table has no way from a
  started attempt to ``cancelled``, and stopping it would record
  ``stopped`` — a person's decision — for something nobody decided.

Driving is synchronous: each node run calls back when it ends and the
pipeline acts in that same loop turn. There is no driver task, so nothing of
a pipeline can outlive its controller: when the controller closes, the
pipeline is called off like a stop (``cancelled`` for what had not started,
a shutdown stop for what runs) and ends with its last node. Callbacks that
arrive while the pipeline is acting (a skip ends a node, which calls back)
are queued and handled in order, so a deep graph does not recurse.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from chongming.errors import ConfigurationError, DuplicateTask, UnknownNode
from chongming.pipeline.graph import PipelineGraph
from chongming.pipeline.join import (
    AggregationPolicy,
    JoinMode,
    JoinVerdict,
    PipelineStatus,
    fails_fast,
    judge_join,
    pipeline_status,
)
from chongming.pipeline.records import NodeSnapshot, PipelineOutcome, PipelineSnapshot
from chongming.run.task_run import TaskRun
from chongming.state.actors import check_actor
from chongming.state.error_text import describe_error
from chongming.state.payload import MAX_REASON_LENGTH, check_reason, json_form
from chongming.state.records import JsonValue
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger

__all__ = ["LivePipelines", "NodeHost", "NodeWriter", "PipelineRun"]

_log = logging.getLogger("chongming.pipeline")
_S = TaskStatus
_NOT_STARTED = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})
_STOPPABLE = frozenset({_S.STARTING, _S.RUNNING, _S.PAUSING, _S.PAUSED})
_READY, _UNSATISFIABLE = JoinVerdict.READY, JoinVerdict.UNSATISFIABLE
_REASON_LIMIT = MAX_REASON_LENGTH


class NodeHost(Protocol):
    """What admitting the nodes needs of the controller's host."""

    def __contains__(self, task_id: str) -> bool: ...
    def register(self, run: TaskRun) -> None: ...
    def forget(self, run: TaskRun) -> None: ...


class NodeWriter(Protocol):
    """What admitting the nodes needs of the write-through (with a store)."""

    async def created(self, run: Any) -> None: ...
    def forget(self, run: Any) -> None: ...


class LivePipelines:
    """The pipelines of one controller that have not ended (called off when it closes)."""

    __slots__ = ("_live",)

    def __init__(self) -> None:
        self._live: dict[PipelineRun, None] = {}

    def add(self, pipeline: PipelineRun) -> None:
        self._live[pipeline] = None

    def discard(self, pipeline: PipelineRun) -> None:
        self._live.pop(pipeline, None)

    def shutdown(self, reason: str) -> None:
        for pipeline in list(self._live):
            pipeline.shutdown(reason)

    def __len__(self) -> int:
        return len(self._live)


class PipelineRun:
    """The handle of one submitted pipeline: wait for it, stop it, read it, reach its nodes.

    Made by :meth:`Controller.submit_pipeline`; see the module docstring for
    how it drives its nodes.
    """

    __slots__ = (
        "_cascade",
        "_done",
        "_draining",
        "_events",
        "_first_failure",
        "_halted",
        "_index",
        "_on_finished",
        "_open",
        "_outcome",
        "_remaining",
        "_runs",
        "_settled",
        "_stopped",
        "_succeeded",
        "graph",
        "run_id",
    )

    def __init__(self, graph: PipelineGraph, run_id: str, runs: list[TaskRun]) -> None:
        self.graph = graph
        self.run_id = run_id
        self._runs = runs
        self._index = {node.node_id: position for position, node in enumerate(graph.nodes)}
        count = len(runs)
        self._settled = [0] * count
        self._succeeded = [0] * count
        self._remaining = count
        self._events: deque[int] = deque()
        self._open = False  # set once every node is admitted (durable, with a store)
        self._draining = False
        self._cascade: tuple[str, str, str] | None = None  # (trigger, reason, actor)
        self._halted = False  # nothing more is released
        self._stopped = False  # called off by a person or the host
        self._first_failure: str | None = None
        self._outcome: PipelineOutcome | None = None
        self._done: asyncio.Future[None] | None = None
        self._on_finished: Callable[[PipelineRun], None] | None = None
        for index, run in enumerate(runs):
            run.add_done_callback(functools.partial(self._node_ended, index))

    # -- reading ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def aggregation(self) -> AggregationPolicy:
        return self.graph.aggregation

    @property
    def status(self) -> PipelineStatus:
        outcome = self._outcome
        return PipelineStatus.RUNNING if outcome is None else outcome.status

    @property
    def done(self) -> bool:
        return self._outcome is not None

    @property
    def outcome(self) -> PipelineOutcome | None:
        """How the pipeline ended; ``None`` until every node has."""
        return self._outcome

    @property
    def runs(self) -> Mapping[str, TaskRun]:
        """Node id -> the node's run, in the order the nodes were added."""
        return MappingProxyType(
            {node.node_id: run for node, run in zip(self.graph.nodes, self._runs, strict=True)}
        )

    def node(self, node_id: str) -> TaskRun:
        """The run of one node (stop, pause, wait for it like any task)."""
        position = self._index.get(node_id) if isinstance(node_id, str) else None
        if position is None:
            raise UnknownNode(self.name, str(node_id))
        return self._runs[position]

    def snapshot(self) -> PipelineSnapshot:
        """Every node's status now, with the cause of its last transition."""
        nodes = []
        for node, run in zip(self.graph.nodes, self._runs, strict=True):
            trigger, reason = "", None
            if run.status_version:
                last = run.last_transition
                trigger, reason = last.trigger, last.reason
            nodes.append(
                NodeSnapshot(
                    node_id=node.node_id,
                    task_id=run.task_id,
                    name=node.task_name,
                    status=run.status,
                    depends_on=node.depends_on,
                    join=node.join,
                    trigger=trigger,
                    reason=reason,
                )
            )
        return PipelineSnapshot(
            run_id=self.run_id,
            name=self.name,
            aggregation=self.aggregation,
            status=self.status,
            nodes=tuple(nodes),
        )

    # -- waiting and stopping -------------------------------------------------------

    async def wait(self, timeout: float | None = None) -> PipelineOutcome:
        """Wait until every node has ended (and, with a store, its end is durable).

        Raises :class:`TimeoutError` when that takes longer than ``timeout``
        seconds; nothing about the pipeline changes then. Cancelling the
        caller does not affect the pipeline either.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
        ):
            raise ConfigurationError(f"timeout must be a number >= 0, got {timeout!r}")
        async with asyncio.timeout(timeout):
            if self._outcome is None:
                if self._done is None:
                    self._done = asyncio.get_running_loop().create_future()
                await asyncio.shield(self._done)
            settled = [f for run in self._runs if (f := run.host.settled(run)) is not None]
            if settled:
                await asyncio.shield(asyncio.gather(*settled))
        assert self._outcome is not None
        return self._outcome

    async def stop(self, reason: str | None = None, *, actor: str = "user") -> bool:
        """Call the pipeline off: running nodes are stopped, the rest cancelled.

        A node that has not started ends ``cancelled`` at once (trigger
        ``orchestrator:pipeline_cancelled``); a started node is asked to stop
        like :meth:`TaskRun.stop` (trigger ``user:stop``) and ends ``stopped``
        once it really has. The outcome is ``cancelled``, unless a node had
        already failed. Returns False if the pipeline had ended or was
        already stopped. Use :meth:`wait` to see the end.
        """
        reason = check_reason(reason)
        actor = check_actor(actor)
        cancel_reason = "the pipeline was stopped" + (f": {reason}" if reason else "")
        if not self._call_off(Trigger.PIPELINE_CANCELLED, cancel_reason, actor):
            return False
        for run in self._runs:
            if run.status in _STOPPABLE:
                await run.stop(reason=reason, actor=actor)
        return True

    def shutdown(self, reason: str) -> None:
        """The controller is closing: like :meth:`stop`, recorded as the runtime's doing."""
        if not self._call_off(Trigger.PIPELINE_CANCELLED, reason, "system"):
            return
        for run in self._runs:
            if run.status in _STOPPABLE:
                run.shutdown(reason)

    # -- admission (called once, by the controller) ------------------------------------

    async def admit(self, host: NodeHost, writer: NodeWriter | None, live: LivePipelines) -> None:
        """Hand every node to ``host``: roots ``queued``, the others ``blocked``.

        With a store (``writer``) the nodes are queued for admission only once
        all of them are durable. If one cannot be stored, those that were
        are cancelled (so the store holds no node that waits forever), the
        others are forgotten, and the store's error is raised.
        """
        if self._on_finished is not None or self._open:
            raise ConfigurationError("a pipeline run is admitted once")
        runs = self._runs
        for run in runs:
            if run.task_id in host:
                raise DuplicateTask(run.task_id)
        for run in runs:
            host.register(run)
        live.add(self)
        self._on_finished = live.discard
        for index, run in enumerate(runs):
            if self.graph.upstreams[index]:
                run.block()
            else:
                run.mark_queued()
        if writer is not None:
            failed: list[tuple[TaskRun, Exception]] = []
            for run in runs:
                try:
                    await writer.created(run)
                except Exception as error:
                    failed.append((run, error))
            if failed:
                self._roll_back(host, writer, failed)
                live.discard(self)
                raise failed[0][1]
        self._open = True
        for index, run in enumerate(runs):
            if not self.graph.upstreams[index]:
                run.enter_admission()
        self._drain()

    def _roll_back(
        self, host: NodeHost, writer: NodeWriter, failed: list[tuple[TaskRun, Exception]]
    ) -> None:
        reason = f"the pipeline could not be stored: {describe_error(failed[0][1])}"
        self._stopped = self._halted = True
        refused = {id(run) for run, _ in failed}
        for run, _ in failed:
            host.forget(run)
            writer.forget(run)
        for run in self._runs:
            if id(run) not in refused and run.status in _NOT_STARTED:
                run.cancel(reason[:_REASON_LIMIT], Trigger.PIPELINE_CANCELLED)

    # -- driving ----------------------------------------------------------------------

    def _node_ended(self, index: int, _: TaskRun) -> None:
        self._events.append(index)
        if self._open and not self._draining:
            self._drain()

    def _drain(self) -> None:
        self._draining = True
        try:
            events = self._events
            while True:
                while events:
                    self._settle(events.popleft())
                cascade = self._cascade
                if cascade is None:
                    break
                self._cascade = None
                self._cancel_not_started(*cascade)
        finally:
            self._draining = False
        if self._remaining == 0 and self._outcome is None:
            self._finish()

    def _settle(self, index: int) -> None:
        """Node ``index`` ended: count it, then judge each of its downstream nodes."""
        graph = self.graph
        runs = self._runs
        status = runs[index].status
        node_id = graph.nodes[index].node_id
        self._remaining -= 1
        if fails_fast(status) and not self._stopped and self._first_failure is None:
            self._first_failure = node_id
            if graph.aggregation is AggregationPolicy.FAIL_FAST and not self._halted:
                self._halted = True
                self._cascade = (
                    Trigger.FAIL_FAST,
                    f"node {node_id!r} {status.value}",
                    "system",
                )
        ok = status is _S.SUCCEEDED
        settled, succeeded = self._settled, self._succeeded
        for downstream in graph.downstreams[index]:
            settled[downstream] += 1
            if ok:
                succeeded[downstream] += 1
            target = runs[downstream]
            if target.status is not _S.BLOCKED:
                continue
            node = graph.nodes[downstream]
            total = len(graph.upstreams[downstream])
            verdict = judge_join(
                node.join, total=total, succeeded=succeeded[downstream], settled=settled[downstream]
            )
            if verdict is _UNSATISFIABLE:
                target.skip(_skip_reason(node.join, node_id, status, total))
            elif verdict is _READY and not self._halted:
                target.unblock(self._inputs_of(downstream))

    def _inputs_of(self, index: int) -> Mapping[str, JsonValue]:
        """The results of the succeeded upstreams of node ``index``, each its own copy."""
        graph = self.graph
        inputs: dict[str, JsonValue] = {}
        for upstream in graph.upstreams[index]:
            run = self._runs[upstream]
            if run.status is _S.SUCCEEDED:
                outcome = run.outcome
                assert outcome is not None
                value = outcome.value
                # A list or dict is copied: one node mutating its input must
                # not change what its siblings see (a process would copy too).
                if isinstance(value, list | dict):
                    value = json_form(value, "upstream result", None)
                inputs[graph.nodes[upstream].node_id] = value
        return MappingProxyType(inputs)

    def _call_off(self, trigger: str, reason: str, actor: str) -> bool:
        if self._outcome is not None or self._stopped:
            return False
        self._stopped = self._halted = True
        if self._draining:  # asked from inside a node's done callback: after this event
            self._cascade = (trigger, reason, actor)
            return True
        self._draining = True
        try:
            self._cancel_not_started(trigger, reason, actor)
        finally:
            self._draining = False
        if self._open:
            self._drain()
        return True

    def _cancel_not_started(self, trigger: str, reason: str, actor: str) -> None:
        for run in self._runs:
            if run.status in _NOT_STARTED:
                run.cancel(reason[:_REASON_LIMIT], trigger, actor)

    def _finish(self) -> None:
        runs = self._runs
        nodes = {}
        for node, run in zip(self.graph.nodes, runs, strict=True):
            outcome = run.outcome
            assert outcome is not None
            nodes[node.node_id] = outcome
        self._outcome = PipelineOutcome(
            run_id=self.run_id,
            name=self.name,
            status=pipeline_status(
                (run.status for run in runs),
                failure_seen=self._first_failure is not None,
                stopped=self._stopped,
            ),
            nodes=MappingProxyType(nodes),
            first_failure=self._first_failure,
        )
        if self._done is not None and not self._done.done():
            self._done.set_result(None)
        finished = self._on_finished
        if finished is not None:
            self._on_finished = None
            finished(self)

    def __repr__(self) -> str:
        return (
            f"<PipelineRun {self.run_id!r} {self.name!r} {self.status.value} "
            f"nodes={len(self._runs)}>"
        )


def _skip_reason(join: JoinMode, upstream: str, status: TaskStatus, total: int) -> str:
    """Why a node was skipped, naming the upstream whose end decided it."""
    if join is JoinMode.ANY_SUCCEEDED and total > 1:
        return f"upstream {upstream!r} {status.value}: none of the {total} upstreams succeeded"
    return f"upstream {upstream!r} {status.value}"
