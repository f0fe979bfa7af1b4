"""The pipeline table in the seed's format: ``NODE TASK STATUS DEPENDS_ON JOIN``.

A pure function like the task table: it reads any records with the five
fields (a :class:`~chongming.pipeline.PipelineSnapshot`'s nodes, or the
snapshot itself), so this layer needs nothing of the pipeline package.
Cells are escaped and widths count terminal cells (see :func:`render_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from chongming.render.table import render_rows
from chongming.state.status import TaskStatus

__all__ = ["PIPELINE_HEADERS", "NodeRow", "render_pipeline"]

PIPELINE_HEADERS = ("NODE", "TASK", "STATUS", "DEPENDS_ON", "JOIN")
_NONE = "-"


class NodeRow(Protocol):
    """What one row needs: a pipeline node as :class:`NodeSnapshot` describes it."""

    @property
    def node_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> TaskStatus: ...
    @property
    def depends_on(self) -> Sequence[str]: ...
    @property
    def join(self) -> str: ...


@runtime_checkable
class _HasNodes(Protocol):
    @property
    def nodes(self) -> Sequence[NodeRow]: ...


def render_pipeline(nodes: Iterable[NodeRow] | _HasNodes) -> str:
    """One row per node, in the order given; ``DEPENDS_ON`` is comma-separated (``-``: none)."""
    rows = nodes.nodes if isinstance(nodes, _HasNodes) else nodes
    return render_rows(
        PIPELINE_HEADERS,
        [
            (
                row.node_id,
                row.name,
                row.status.value,
                ",".join(row.depends_on) or _NONE,
                str(row.join),
            )
            for row in rows
        ],
    )
