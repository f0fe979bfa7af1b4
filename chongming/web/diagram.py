"""The state machine as an inline SVG: the current state highlighted, the path taken drawn bold.

Drawn from :data:`chongming.state.table.TRANSITIONS` (the same table the
Mermaid diagram of the docs comes from), so the picture cannot drift from the
rules. The layout is fixed by hand, left to right along a task's life; no
script and no network are needed to show it.
"""

from __future__ import annotations

from collections.abc import Iterable

from chongming.state.records import Transition
from chongming.state.status import TaskStatus
from chongming.state.table import TRANSITIONS

__all__ = ["state_svg"]

_S = TaskStatus
#: Centre of each state's box (x, y) in a 1100 x 340 canvas.
_AT: dict[TaskStatus, tuple[int, int]] = {
    _S.PENDING: (70, 170),
    _S.BLOCKED: (230, 50),
    _S.QUEUED: (230, 170),
    _S.RETRY_WAIT: (400, 300),
    _S.STARTING: (400, 170),
    _S.RUNNING: (580, 170),
    _S.PAUSING: (580, 50),
    _S.PAUSED: (780, 50),
    _S.STOPPING: (780, 280),
    _S.SUCCEEDED: (1020, 30),
    _S.FAILED: (1020, 86),
    _S.STOPPED: (1020, 142),
    _S.CANCELLED: (1020, 198),
    _S.SKIPPED: (1020, 254),
    _S.LOST: (1020, 310),
}
_W, _H = 112, 30


def _edge(source: TaskStatus, target: TaskStatus, taken: bool) -> str:
    paired = source in TRANSITIONS.get(target, ())
    (x1, y1), (x2, y2) = _AT[source], _AT[target]
    # Leave and enter each box at its border, bending every edge a little so
    # that the edges of a pair (running <-> pausing) do not overlap.
    dx, dy = x2 - x1, y2 - y1
    scale = max(abs(dx) / (_W / 2 + 4), abs(dy) / (_H / 2 + 4), 1e-9)
    sx, sy = x1 + dx / scale, y1 + dy / scale
    ex, ey = x2 - dx / scale, y2 - dy / scale
    bend = 0.15 if paired else 0.04  # a pair (running <-> pausing) bends apart
    mx, my = (sx + ex) / 2 - (ey - sy) * bend, (sy + ey) / 2 + (ex - sx) * bend
    css = "edge taken" if taken else "edge"
    marker = "url(#arrow-taken)" if taken else "url(#arrow)"
    return (
        f'<path class="{css}" d="M{sx:.0f},{sy:.0f} Q{mx:.0f},{my:.0f} {ex:.0f},{ey:.0f}" '
        f'marker-end="{marker}"><title>{source.value} \u2192 {target.value}</title></path>'
    )


def state_svg(current: TaskStatus, history: Iterable[Transition] = ()) -> str:
    """An SVG document fragment; ``current`` is highlighted, ``history``'s edges are bold."""
    taken = {(t.from_status, t.to_status) for t in history}
    visited = {status for pair in taken for status in pair}
    parts = [
        '<svg class="states" viewBox="0 0 1100 340" role="img" '
        f'aria-label="state diagram, current state {current.value}" '
        'xmlns="http://www.w3.org/2000/svg">',
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'class="arrowhead"/></marker>',
        '<marker id="arrow-taken" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'class="arrowhead taken"/></marker>',
        "</defs>",
    ]
    for source, targets in TRANSITIONS.items():
        for target in targets:
            if (source, target) not in taken:
                parts.append(_edge(source, target, False))
    for source, target in sorted(taken, key=lambda pair: (pair[0].value, pair[1].value)):
        if target in TRANSITIONS.get(source, ()):
            parts.append(_edge(source, target, True))
    for status, (x, y) in _AT.items():
        classes = ["state"]
        if status.is_terminal:
            classes.append("terminal")
        if status in visited:
            classes.append("visited")
        if status is current:
            classes.append("current")
        parts.append(
            f'<g class="{" ".join(classes)}" data-state="{status.value}">'
            f'<rect x="{x - _W // 2}" y="{y - _H // 2}" width="{_W}" height="{_H}" rx="7"/>'
            f'<text x="{x}" y="{y + 5}" text-anchor="middle">{status.value}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)
