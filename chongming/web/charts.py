"""Server-rendered SVG charts: stacked bars by minute, horizontal bars. No script, no library.

Every label goes through :func:`~chongming.web.pages.e`; colours are
presentation attributes (``fill="…"``), which the Content-Security-Policy
allows (inline ``style`` would not be). Sizes are fixed: a chart is at most
:data:`MAX_BARS` bars, whatever the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from chongming.web.pages import e

__all__ = ["COLOURS", "MAX_BARS", "hbar_chart", "human_seconds", "stacked_minutes"]

MAX_BARS = 120
#: One colour per status, the badges' hues.
COLOURS = {
    "succeeded": "#2e9e57",
    "failed": "#c8423a",
    "lost": "#8c1d18",
    "stopped": "#7d8592",
    "cancelled": "#a9afb9",
    "skipped": "#cfd3da",
    "queued": "#6b7280",
    "running": "#2450a6",
    "starting": "#5b84d6",
    "pausing": "#d59b2d",
    "paused": "#b07a12",
    "retry_wait": "#e0b050",
    "stopping": "#9a5b00",
    "pending": "#b9c0cc",
    "blocked": "#8f96a3",
}
_OTHER = "#555c68"


def human_seconds(seconds: float) -> str:
    """``0.012 s``, ``4.2 s``, ``3 min 5 s``, ``2 h 4 min``."""
    if seconds < 10:
        return f"{seconds:.3g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def _svg(width: int, height: int, label: str, body: str) -> str:
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-label="{e(label)}"><title>{e(label)}</title>{body}</svg>'
    )


def stacked_minutes(
    per_minute: Sequence[Mapping[str, int]], *, label: str, width: int = 760, height: int = 240
) -> str:
    """One stacked bar per minute (oldest left), a segment per status; a legend below."""
    minutes = list(per_minute)[-MAX_BARS:]
    left, right, top, bottom = 44, 8, 10, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((sum(m.values()) for m in minutes), default=0)
    scale = plot_h / peak if peak else 0.0
    step = plot_w / max(1, len(minutes))
    parts = [
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#9aa3b2"/>',
        f'<text x="{left - 6}" y="{top + 10}" text-anchor="end" font-size="11">{peak}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" font-size="11">0</text>',
    ]
    seen: list[str] = []
    count = len(minutes)
    for index, minute in enumerate(minutes):
        x = left + index * step
        y = float(top + plot_h)
        for status in sorted(minute):
            value = minute[status]
            if value <= 0:
                continue
            if status not in seen:
                seen.append(status)
            h = value * scale
            y -= h
            ago = count - index
            parts.append(
                f'<rect class="bar" data-status="{e(status)}" x="{x + 0.5:.1f}" y="{y:.1f}" '
                f'width="{max(1.0, step - 1):.1f}" height="{h:.1f}" '
                f'fill="{COLOURS.get(status, _OTHER)}"><title>{e(status)} {value} '
                f"({ago} min ago)</title></rect>"
            )
    for index in range(0, count + 1, 10):
        x = left + index * step
        text = "now" if index == count else f"-{count - index} min"
        anchor = "end" if index == count else "middle"
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="{anchor}" '
            f'font-size="11">{text}</text>'
        )
    for index, status in enumerate(seen):
        x = left + index * 110
        parts.append(
            f'<rect x="{x}" y="{height - 20}" width="10" height="10" '
            f'fill="{COLOURS.get(status, _OTHER)}"/>'
            f'<text x="{x + 14}" y="{height - 11}" font-size="11">{e(status)}</text>'
        )
    if not peak:
        parts.append(
            f'<text x="{left + plot_w / 2:.0f}" y="{top + plot_h / 2:.0f}" text-anchor="middle" '
            'font-size="13" fill="#5b6473">nothing ended in this hour</text>'
        )
    return _svg(width, height, label, "".join(parts))


def hbar_chart(
    rows: Sequence[tuple[str, float, str]],
    *,
    label: str,
    seconds: bool = False,
    width: int = 520,
) -> str:
    """One horizontal bar per ``(name, value, colour)``, the value written after it.

    ``seconds``: the values are durations (written ``4.2 s``), else counts.
    """
    rows = list(rows)[:MAX_BARS]
    left, right, row_h = 110, 110, 24
    height = max(1, len(rows)) * row_h + 8
    peak = max((value for _, value, _ in rows), default=0.0)
    plot_w = width - left - right
    parts = []
    for index, (name, value, colour) in enumerate(rows):
        y = 4 + index * row_h
        w = plot_w * value / peak if peak else 0.0
        shown = human_seconds(value) if seconds else f"{value:,.0f}"
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" font-size="12">{e(name)}</text>'
            f'<rect class="bar" data-name="{e(name)}" x="{left}" y="{y + 3}" '
            f'width="{max(w, 1.0):.1f}" height="{row_h - 8}" fill="{e(colour)}">'
            f"<title>{e(name)}: {e(shown)}</title></rect>"
            f'<text x="{left + max(w, 1.0) + 6:.1f}" y="{y + 15}" font-size="12">{e(shown)}</text>'
        )
    if not rows:
        parts.append(f'<text x="{left}" y="18" font-size="12" fill="#5b6473">none</text>')
    return _svg(width, height, label, "".join(parts))
