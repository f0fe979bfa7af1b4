"""The charts page: throughput by minute, the queue and its oldest task, attempt durations.

Same rules as :mod:`chongming.web.pages`; the charts are
:mod:`chongming.web.charts`'s SVG, drawn by the server.
"""

from __future__ import annotations

from chongming.state.status import ACTIVE_STATUSES, TaskStatus
from chongming.web.activity import MINUTES, PERCENTILES, ActivityView
from chongming.web.charts import COLOURS, hbar_chart, human_seconds, stacked_minutes
from chongming.web.pages import Chrome, layout, when

__all__ = ["charts_body", "charts_page"]


def charts_body(view: ActivityView) -> str:
    """The live part of the page."""
    if not view.available:
        return (
            '<p class="muted" id="no-charts">this store has no activity reads '
            "(recent_ends, oldest_queued): no charts</p>"
        )
    active = [
        (status.value, float(view.counts.get(status.value, 0)), COLOURS[status.value])
        for status in sorted(ACTIVE_STATUSES, key=list(TaskStatus).index)
        if view.counts.get(status.value, 0)
    ]
    age = view.oldest_age
    oldest = (
        "no claimable task waits"
        if age is None
        else f"oldest claimable task queued {human_seconds(age)} ago "
        f"(at {when(view.oldest_queued)} UTC)"
    )
    durations = [(f"p{pct}", view.durations.get(pct, 0.0), "#2450a6") for pct in PERCENTILES]
    return (
        f'<h2>Throughput <span class="muted">ends per minute by status, last {MINUTES} min '
        f'· <span id="ends">{view.ends:,}</span> ends</span></h2>'
        + stacked_minutes(view.per_minute, label="ends per minute by status")
        + f'<h2>Queue <span class="muted">depth <span id="depth">{view.queued:,}</span> · '
        f'<span id="oldest">{oldest}</span></span></h2>'
        + hbar_chart(active, label="unfinished tasks by status")
        + f'<h2>Attempt durations <span class="muted">of the newest <span id="timed">'
        f"{view.timed:,}</span> ends that ran (their last run: from its start to the end)"
        "</span></h2>"
        + hbar_chart(durations, label="attempt duration percentiles", seconds=True)
        + f'<p class="muted">by the store\'s clock at {when(view.now)} UTC</p>'
    )


def charts_page(chrome: Chrome, view: ActivityView) -> str:
    fragment = chrome.url("/fragments/charts")
    body = (
        '<h1>Charts <span id="live-state" class="live">live</span></h1>'
        f'<div id="live" data-live="{fragment}" data-every="5000">{charts_body(view)}</div>'
    )
    return layout(chrome, "charts", "Charts", body)
