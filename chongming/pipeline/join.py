"""Join modes, aggregation policies and the rules that follow from them: pure decisions.

Two axes that must not be mixed up:

- a :class:`JoinMode` belongs to one node and answers *when may this node
  run?* from the outcomes of its own upstream nodes;
- an :class:`AggregationPolicy` belongs to the whole pipeline and answers
  *does one failure call off the rest?*, and so how the pipeline ends.

The driver (:mod:`chongming.pipeline.run`) counts upstream outcomes and asks
:func:`judge_join`; it never re-decides what these functions say.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from chongming.errors import QuorumNotSupported
from chongming.state.status import TaskStatus

__all__ = [
    "AggregationPolicy",
    "JoinMode",
    "JoinVerdict",
    "PipelineStatus",
    "fails_fast",
    "judge_join",
    "pipeline_status",
]


def _refuse_quorum(value: object) -> None:
    if isinstance(value, str) and value.strip().lower().startswith("quorum"):
        raise QuorumNotSupported(value)


class JoinMode(enum.StrEnum):
    """When a node with upstream nodes may run."""

    #: A barrier: every upstream succeeded.
    ALL_SUCCEEDED = "all_succeeded"
    #: Every upstream has ended, however (an audit or clean-up step).
    ALL_SETTLED = "all_settled"
    #: At least one upstream succeeded (the first success releases the node).
    ANY_SUCCEEDED = "any_succeeded"

    @classmethod
    def _missing_(cls, value: object) -> None:
        _refuse_quorum(value)


class AggregationPolicy(enum.StrEnum):
    """What one failed node does to the rest of its pipeline."""

    #: A failed (or lost) node calls off every node that has not started: ``cancelled``.
    FAIL_FAST = "fail_fast"
    #: Everything that can still run, runs; joins alone decide.
    ALL_SETTLED = "all_settled"

    @classmethod
    def _missing_(cls, value: object) -> None:
        _refuse_quorum(value)


class PipelineStatus(enum.StrEnum):
    """Where a pipeline is: running until every node has ended, then its outcome."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JoinVerdict(enum.Enum):
    WAIT = "wait"  # not decided yet: some upstream has not ended
    READY = "ready"  # the join holds: queue the node
    UNSATISFIABLE = "unsatisfiable"  # it never can: the node is skipped


def judge_join(join: JoinMode, *, total: int, succeeded: int, settled: int) -> JoinVerdict:
    """The verdict for a node with ``total`` upstreams, ``settled`` of them ended.

    ``succeeded`` counts the settled upstreams that succeeded. A node with no
    upstream is always ready, whatever its join says.
    """
    if total == 0:
        return JoinVerdict.READY
    if join is JoinMode.ALL_SUCCEEDED:
        if settled > succeeded:
            return JoinVerdict.UNSATISFIABLE
        return JoinVerdict.READY if succeeded == total else JoinVerdict.WAIT
    if join is JoinMode.ALL_SETTLED:
        return JoinVerdict.READY if settled == total else JoinVerdict.WAIT
    if succeeded:
        return JoinVerdict.READY
    return JoinVerdict.UNSATISFIABLE if settled == total else JoinVerdict.WAIT


#: The endings that call a fail-fast pipeline off: the node broke, or nobody knows.
#: ``cancelled`` is the cascade's result, never its cause; ``stopped`` is a person's call.
_FAILING = frozenset({TaskStatus.FAILED, TaskStatus.LOST})
_CALLED_OFF = frozenset({TaskStatus.STOPPED, TaskStatus.CANCELLED})


def fails_fast(status: TaskStatus) -> bool:
    """True for the node endings that make a ``FAIL_FAST`` pipeline call off the rest."""
    return status in _FAILING


def pipeline_status(
    statuses: Iterable[TaskStatus], *, failure_seen: bool, stopped: bool
) -> PipelineStatus:
    """How a pipeline whose nodes all ended in ``statuses`` ended.

    ``failed`` when a node failed or was lost before anyone stopped the
    pipeline; otherwise ``cancelled`` when the pipeline was stopped or a node
    was stopped or cancelled; otherwise ``succeeded``. A stop of the whole
    pipeline is a person's (or the host's) decision, so what fails after it
    does not turn the outcome into ``failed``.
    """
    if failure_seen:
        return PipelineStatus.FAILED
    if stopped or any(status in _CALLED_OFF for status in statuses):
        return PipelineStatus.CANCELLED
    return PipelineStatus.SUCCEEDED
