"""Building a pipeline and checking it: every mistake is found before any node exists.

:class:`Pipeline` is a recipe — registered task names, JSON arguments and
the dependencies between nodes — so it can be submitted any number of times.
:func:`Pipeline.validate` turns it into a frozen :class:`PipelineGraph`
(indices, upstream and downstream lists) or raises the typed error that names
the problem: an unknown upstream, a cycle (with its path), an unregistered
task name. Duplicate ids, bad ids, non-JSON arguments and quorum settlement
are refused as the node is added.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from chongming.errors import (
    ConfigurationError,
    DuplicateNode,
    InvalidPipeline,
    PayloadError,
    PipelineCycle,
    UnknownTask,
    UnknownUpstream,
)
from chongming.pipeline.join import AggregationPolicy, JoinMode
from chongming.state.payload import MAX_TASK_ID_LENGTH, check_task_id, json_form_arguments

__all__ = [
    "MAX_NODE_ID_LENGTH",
    "MAX_PIPELINE_NAME_LENGTH",
    "MAX_RUN_ID_LENGTH",
    "Node",
    "Pipeline",
    "PipelineGraph",
    "check_run_id",
]

#: A node's task id is ``<run_id>:<node_id>``; both parts fit a task id together.
MAX_NODE_ID_LENGTH = 100
MAX_RUN_ID_LENGTH = MAX_TASK_ID_LENGTH - MAX_NODE_ID_LENGTH - 1
MAX_PIPELINE_NAME_LENGTH = 100
_Mode = TypeVar("_Mode", JoinMode, AggregationPolicy)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Node:
    """One node of a pipeline: what :meth:`Pipeline.node` returns, and what
    ``depends_on`` accepts besides a node id. Compared by identity."""

    node_id: str
    task_name: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    depends_on: tuple[str, ...]
    join: JoinMode


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelineGraph:
    """A validated pipeline: nodes in the order they were added, edges as indices."""

    name: str
    aggregation: AggregationPolicy
    nodes: tuple[Node, ...]
    upstreams: tuple[tuple[int, ...], ...]
    downstreams: tuple[tuple[int, ...], ...]


class Pipeline:
    """A DAG of registered tasks, run by :meth:`Controller.submit_pipeline`.

    ``aggregation`` decides what one failure does to the rest (default
    :attr:`AggregationPolicy.FAIL_FAST`); each node's ``join`` decides when
    that node may run.
    """

    __slots__ = ("_aggregation", "_nodes", "name")

    def __init__(
        self,
        name: str,
        *,
        aggregation: AggregationPolicy | str = AggregationPolicy.FAIL_FAST,
    ) -> None:
        self.name = _check_name(name)
        self._aggregation = _parse(AggregationPolicy, aggregation, "aggregation")
        self._nodes: dict[str, Node] = {}

    @property
    def aggregation(self) -> AggregationPolicy:
        return self._aggregation

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes in the order they were added."""
        return tuple(self._nodes.values())

    def node(
        self,
        task_name: str,
        *args: Any,
        node_id: str | None = None,
        depends_on: Iterable[Node | str] = (),
        join: JoinMode | str = JoinMode.ALL_SUCCEEDED,
        **kwargs: Any,
    ) -> Node:
        """Add a node running the registered task ``task_name`` with these JSON arguments.

        ``node_id`` defaults to the task name. ``depends_on`` lists upstream
        nodes (the :class:`Node` objects this method returns, or their ids;
        an id may name a node added later). Whether the task name is
        registered, and whether the graph is acyclic, is checked when the
        pipeline is validated or submitted.
        """
        if not isinstance(task_name, str) or not task_name:
            raise ConfigurationError(f"task names are non-empty strings, got {task_name!r}")
        node_id = _check_node_id(task_name if node_id is None else node_id)
        if node_id in self._nodes:
            raise DuplicateNode(self.name, node_id)
        upstream = _upstream_ids(depends_on, node_id)
        mode = _parse(JoinMode, join, "join")
        try:
            args, plain_kwargs = json_form_arguments(args, kwargs, None)
        except PayloadError as error:
            raise PayloadError(f"node {node_id!r}: {error.what}", error.reason) from None
        node = Node(
            node_id=node_id,
            task_name=task_name,
            args=args,
            kwargs=MappingProxyType(plain_kwargs),
            depends_on=upstream,
            join=mode,
        )
        self._nodes[node_id] = node
        return node

    def validate(self, registered: Container[str] | None = None) -> PipelineGraph:
        """The checked graph, or the error naming what is wrong.

        Checks, in order: the pipeline has nodes; every upstream is a node
        of it; there is no cycle; every task name is in ``registered`` (a
        :class:`TaskRegistry`, or any container of names; skipped if None).
        """
        nodes = tuple(self._nodes.values())
        if not nodes:
            raise InvalidPipeline(self.name, "it has no nodes")
        index = {node.node_id: position for position, node in enumerate(nodes)}
        for node in nodes:
            for upstream in node.depends_on:
                if upstream not in index:
                    raise UnknownUpstream(self.name, node.node_id, upstream)
        upstreams = tuple(tuple(index[u] for u in node.depends_on) for node in nodes)
        cycle = find_cycle(upstreams)
        if cycle is not None:
            raise PipelineCycle(self.name, tuple(nodes[i].node_id for i in cycle))
        if registered is not None:
            for node in nodes:
                if node.task_name not in registered:
                    names = tuple(sorted(registered)) if isinstance(registered, Iterable) else ()
                    error = UnknownTask(node.task_name, names)
                    error.add_note(f"in node {node.node_id!r} of pipeline {self.name!r}")
                    raise error
        downstreams: list[list[int]] = [[] for _ in nodes]
        for position, ups in enumerate(upstreams):
            for upstream_index in ups:
                downstreams[upstream_index].append(position)
        return PipelineGraph(
            name=self.name,
            aggregation=self._aggregation,
            nodes=nodes,
            upstreams=upstreams,
            downstreams=tuple(tuple(d) for d in downstreams),
        )

    def __repr__(self) -> str:
        return f"<Pipeline {self.name!r} nodes={len(self._nodes)} {self._aggregation.value}>"


def find_cycle(upstreams: tuple[tuple[int, ...], ...]) -> list[int] | None:
    """One cycle of the graph as a closed path (``[a, b, a]``), or None if it is a DAG.

    Iterative depth-first search along upstream edges, so a long chain cannot
    exhaust the recursion limit; the path is given in dependency order
    (each node depends on the one after it).
    """
    new, open_, done = 0, 1, 2
    state = [new] * len(upstreams)
    for start in range(len(upstreams)):
        if state[start] != new:
            continue
        path = [start]
        cursors = [0]
        state[start] = open_
        while path:
            here = path[-1]
            ups = upstreams[here]
            if cursors[-1] < len(ups):
                nxt = ups[cursors[-1]]
                cursors[-1] += 1
                if state[nxt] == open_:
                    return [*path[path.index(nxt) :], nxt]
                if state[nxt] == new:
                    state[nxt] = open_
                    path.append(nxt)
                    cursors.append(0)
            else:
                state[here] = done
                path.pop()
                cursors.pop()
    return None


def check_run_id(run_id: object) -> str:
    """A pipeline run id: task-id text without ``:`` (it separates run and node)."""
    if not isinstance(run_id, str):
        raise PayloadError("run_id", f"must be a string, got {type(run_id).__name__}")
    if len(run_id) > MAX_RUN_ID_LENGTH:
        raise PayloadError("run_id", f"longer than {MAX_RUN_ID_LENGTH} characters")
    if ":" in run_id:
        raise PayloadError("run_id", "must not contain ':' (it separates run id and node id)")
    return _as_task_id_text(run_id, "run_id")


def _check_node_id(node_id: object) -> str:
    if not isinstance(node_id, str):
        raise PayloadError("node_id", f"must be a string, got {type(node_id).__name__}")
    if len(node_id) > MAX_NODE_ID_LENGTH:
        raise PayloadError("node_id", f"longer than {MAX_NODE_ID_LENGTH} characters")
    return _as_task_id_text(node_id, "node_id")


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise ConfigurationError(f"a pipeline name is a string, got {type(name).__name__}")
    if len(name) > MAX_PIPELINE_NAME_LENGTH:
        raise PayloadError("pipeline name", f"longer than {MAX_PIPELINE_NAME_LENGTH} characters")
    return _as_task_id_text(name, "pipeline name")


def _as_task_id_text(text: str, what: str) -> str:
    """The task id rules (non-empty, printable, storable), reported under ``what``."""
    try:
        return check_task_id(text)
    except PayloadError as error:
        raise PayloadError(what, error.reason) from None


def _upstream_ids(depends_on: Iterable[Node | str], node_id: str) -> tuple[str, ...]:
    if isinstance(depends_on, str | Node):
        raise ConfigurationError(
            f"node {node_id!r}: depends_on takes a list of nodes or node ids, "
            f"not a single {type(depends_on).__name__}"
        )
    try:
        items = list(depends_on)
    except TypeError:
        raise ConfigurationError(
            f"node {node_id!r}: depends_on takes a list of nodes or node ids, "
            f"got {type(depends_on).__name__}"
        ) from None
    ids: dict[str, None] = {}  # ordered, and a repeated upstream counts once
    for item in items:
        upstream = item.node_id if isinstance(item, Node) else item
        if not isinstance(upstream, str):
            raise ConfigurationError(
                f"node {node_id!r}: depends_on items are nodes or node ids, got {item!r}"
            )
        ids[upstream] = None
    return tuple(ids)


def _parse(kind: type[_Mode], value: object, what: str) -> _Mode:
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError as error:
            if isinstance(error, ConfigurationError):
                raise  # QuorumNotSupported: it explains itself
            choices = ", ".join(member.value for member in kind)
            raise ConfigurationError(f"{what} must be one of {choices}; got {value!r}") from None
    raise ConfigurationError(f"{what} must be a {kind.__name__}, got {value!r}")
