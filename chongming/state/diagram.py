"""The state diagram and table of the docs, generated from :data:`TRANSITIONS`.

The rendering functions are pure: the same table always gives the same text,
so the documentation can be checked against the code in CI. The command line
only reads and writes files::

    python -m chongming.state.diagram                               # print the diagram
    python -m chongming.state.diagram --write docs/state-model.md   # refresh the page
    python -m chongming.state.diagram --check docs/state-model.md   # exit 1 if stale

A page holds each generated block between marker comments
(``<!-- state-diagram:start -->`` / ``<!-- state-diagram:end -->`` and
``<!-- state-table:start -->`` / ``<!-- state-table:end -->``); everything
outside the markers is left untouched.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS

__all__ = [
    "DIAGRAM_MARKERS",
    "REGENERATE_COMMAND",
    "TABLE_MARKERS",
    "MarkerError",
    "embed",
    "extract",
    "main",
    "render_blocks",
    "render_markdown_table",
    "render_mermaid",
    "render_page",
]

Table = Mapping[TaskStatus, Iterable[TaskStatus]]

DIAGRAM_MARKERS = ("<!-- state-diagram:start -->", "<!-- state-diagram:end -->")
TABLE_MARKERS = ("<!-- state-table:start -->", "<!-- state-table:end -->")
REGENERATE_COMMAND = "python -m chongming.state.diagram --write docs/state-model.md"

_ORDER = {status: index for index, status in enumerate(TaskStatus)}


class MarkerError(ValueError):
    """A page lacks a start or end marker, or holds them out of order."""


def _sorted(statuses: Iterable[TaskStatus]) -> list[TaskStatus]:
    return sorted(set(statuses), key=lambda status: _ORDER[status])


def _states(transitions: Table) -> list[TaskStatus]:
    seen: set[TaskStatus] = set(transitions)
    for targets in transitions.values():
        seen.update(targets)
    return _sorted(seen)


def _terminal(transitions: Table) -> list[TaskStatus]:
    """States with no way out: absent from the table's keys or mapped to nothing."""
    return [state for state in _states(transitions) if not list(transitions.get(state, ()))]


def render_mermaid(transitions: Table = TRANSITIONS) -> str:
    """A Mermaid ``stateDiagram-v2`` of ``transitions``.

    States and edges follow the declaration order of :class:`TaskStatus`, so
    the output is byte-for-byte stable. Every task is born ``pending``;
    terminal states (no outgoing edge) lead to the end marker and carry the
    ``terminal`` class.
    """
    lines = ["stateDiagram-v2"]
    states = _states(transitions)
    if TaskStatus.PENDING in states:
        lines.append(f"    [*] --> {TaskStatus.PENDING.value}")
    for source in states:
        for target in _sorted(transitions.get(source, ())):
            lines.append(f"    {source.value} --> {target.value}")
    terminal = _terminal(transitions)
    for state in terminal:
        lines.append(f"    {state.value} --> [*]")
    if terminal:
        lines.append("    classDef terminal font-weight:bold,stroke-width:3px")
        lines.append(f"    class {','.join(state.value for state in terminal)} terminal")
    return "\n".join(lines) + "\n"


def render_markdown_table(transitions: Table = TRANSITIONS) -> str:
    """The table as Markdown: one row per state, terminal states in bold."""
    terminal = set(_terminal(transitions))
    lines = ["| from | kind | allowed to |", "|---|---|---|"]
    for source in _states(transitions):
        targets = _sorted(transitions.get(source, ()))
        allowed = ", ".join(f"`{target.value}`" for target in targets) or "nothing"
        if source in terminal:
            lines.append(f"| **`{source.value}`** | terminal | {allowed} |")
        else:
            lines.append(f"| `{source.value}` | non-terminal | {allowed} |")
    return "\n".join(lines) + "\n"


def render_blocks(transitions: Table = TRANSITIONS) -> dict[tuple[str, str], str]:
    """What goes between each pair of markers of a docs page."""
    return {
        DIAGRAM_MARKERS: f"```mermaid\n{render_mermaid(transitions)}```\n",
        TABLE_MARKERS: render_markdown_table(transitions),
    }


def _span(document: str, markers: tuple[str, str]) -> tuple[int, int]:
    start_marker, end_marker = markers
    start = document.find(start_marker)
    if start < 0:
        raise MarkerError(f"marker {start_marker!r} not found")
    body = start + len(start_marker)
    end = document.find(end_marker, body)
    if end < 0:
        raise MarkerError(f"marker {end_marker!r} not found after {start_marker!r}")
    if document.find(start_marker, body) != -1:
        raise MarkerError(f"marker {start_marker!r} appears more than once")
    return body, end


def extract(document: str, markers: tuple[str, str] = DIAGRAM_MARKERS) -> str:
    """The text between ``markers``, without the newline that follows the start marker."""
    body, end = _span(document, markers)
    return document[body:end].removeprefix("\n")


def embed(document: str, block: str, markers: tuple[str, str] = DIAGRAM_MARKERS) -> str:
    """``document`` with the text between ``markers`` replaced by ``block``."""
    body, end = _span(document, markers)
    return f"{document[:body]}\n{block}{document[end:]}"


def render_page(document: str, transitions: Table = TRANSITIONS) -> str:
    """``document`` with every generated block brought up to date."""
    for markers, block in render_blocks(transitions).items():
        document = embed(document, block, markers)
    return document


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chongming.state.diagram",
        description="Print the state diagram, or refresh/check it in a Markdown page.",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PAGE", type=Path, help="rewrite the generated blocks")
    group.add_argument("--check", metavar="PAGE", type=Path, help="exit 1 if PAGE is stale")
    options = parser.parse_args(argv)
    page: Path | None = options.write or options.check
    if page is None:
        sys.stdout.write(render_mermaid())
        return 0
    try:
        current = page.read_text(encoding="utf-8")
        updated = render_page(current)
    except (OSError, MarkerError) as error:
        print(f"error: {page}: {error}", file=sys.stderr)
        return 1
    if options.check:
        if updated != current:
            print(f"{page} is out of date; run: {REGENERATE_COMMAND}", file=sys.stderr)
            return 1
        return 0
    if updated != current:
        page.write_text(updated, encoding="utf-8")
        print(f"updated {page}")
    else:
        print(f"{page} is up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
