"""The operator pages: nodes and buckets (with their warnings) and reconcile (dry run, then apply).

Same rules as :mod:`chongming.web.pages`: every value from the store is
escaped with :func:`~chongming.web.pages.e`.
"""

from __future__ import annotations

from chongming.plane.reconcile import ReconcileOutcome, ReconcileReport
from chongming.scheduler.buckets import format_bucket_ranges
from chongming.schedules.loop import describe_schedule
from chongming.web.board import NodesView
from chongming.web.pages import Chrome, e, layout, table, when

__all__ = ["nodes_page", "reconcile_page"]


_NODE_HEADERS = [
    "owner",
    "state",
    "buckets",
    "host",
    "pid",
    "version",
    "started",
    "renewed",
    "expires",
    "serves",
]


def _buckets_of(owned: frozenset[int] | None, num_buckets: int) -> str:
    if owned is None:
        return f"all ({num_buckets})"
    return e(format_bucket_ranges(owned)) if owned else "none"


def nodes_page(chrome: Chrome, view: NodesView) -> str:
    report = view.buckets
    warnings = []
    for row in report.owned_twice:
        warnings.append(
            f'<div class="warning" data-warning="owned-twice">bucket {row.bucket} is '
            f"<strong>owned twice</strong>: it is in the declared ranges (owned_buckets) of "
            f"live nodes {e(', '.join(row.ranged))}. Ranges are meant to partition the buckets; "
            "both nodes accept submits into it and reconcile it (no task runs twice for it). "
            "Give each node its own range, or declare none on any node for a shared pool.</div>"
        )
    for owner, theirs in sorted(report.mismatched.items()):
        warnings.append(
            f'<div class="warning" data-warning="mismatched">live node {e(owner)} uses '
            f"<strong>{theirs} buckets</strong>, this dashboard {report.num_buckets}: one key "
            "lands in different buckets on them; give every node the same num_buckets.</div>"
        )
    for row in report.orphaned:
        warnings.append(
            f'<div class="warning" data-warning="orphaned">bucket {row.bucket} has '
            f"{row.active} unfinished task(s) and <strong>no live owner</strong>: nobody runs or "
            "reconciles them.</div>"
        )
    for name, count in sorted(report.unserved.items()):
        warnings.append(
            f'<div class="warning" data-warning="unserved">{count} queued task(s) of '
            f"<code>{e(name)}</code>: no live worker serves them; they wait.</div>"
        )
    if report.unbucketed_active:
        warnings.append(
            f'<div class="notice">{report.unbucketed_active} unfinished task(s) have no '
            "bucket.</div>"
        )
    nodes = table(
        _NODE_HEADERS,
        (
            [
                f'<span class="text">{e(node.info.owner)}</span>',
                "live" if node.live else '<span class="muted">expired</span>',
                _buckets_of(node.info.owned_buckets, node.info.num_buckets),
                e(node.info.host),
                str(node.info.pid),
                e(node.info.version),
                when(node.started_at),
                when(node.renewed_at),
                when(node.lease_expires_at),
                e(", ".join(sorted(node.info.serves)) or "-"),
            ]
            for node in view.nodes
        ),
    )
    if not view.nodes:
        nodes = '<p class="muted">no node has registered in this store</p>'
    rows = [
        [
            str(row.bucket),
            e(", ".join(row.owners) or "-"),
            str(row.tasks),
            str(row.active),
            " ".join(
                flag
                for flag, on in (
                    ('<span class="flag">OWNED TWICE</span>', row.owned_twice),
                    ('<span class="flag">ORPHANED</span>', row.orphaned),
                )
                if on
            )
            or "-",
        ]
        for row in report.rows
    ]
    buckets = (
        table(["bucket", "live owners", "tasks", "unfinished", "flags"], rows)
        if rows
        else '<p class="muted">no bucket has an owner or a task</p>'
    )
    limits = ""
    if view.limits:
        limits = "<h2>Cluster-wide limits</h2>" + table(
            ["limit", "capacity", "held", "free", "holders"],
            (
                [
                    e(limit.name),
                    str(limit.capacity),
                    str(limit.held),
                    str(limit.free),
                    e(", ".join(f"{o}={n}" for o, n in sorted(limit.holders.items())) or "-"),
                ]
                for limit in view.limits
            ),
        )
    rates = ""
    if view.rate_limits:
        rates = "<h2>Rate limits</h2>" + table(
            ["tag", "starts allowed", "one start every"],
            (
                [e(name), e(str(limit)), f"{limit.interval:.3g} s"]
                for name, limit in sorted(view.rate_limits.items())
            ),
        )
    schedules = ""
    if view.schedules:
        schedules = "<h2>Schedules</h2>" + table(
            ["schedule", "task", "cadence", "state", "next fire", "last fired", "catch-up"],
            (
                [
                    e(record.key),
                    e(record.task_name),
                    e(describe_schedule(record)),
                    "paused" if record.paused else "active",
                    "-" if record.paused else when(record.next_fire),
                    when(record.last_fired),
                    e(record.catch_up),
                ]
                for record in view.schedules
            ),
        )
    body = (
        "<h1>Nodes &amp; buckets</h1>"
        + "".join(warnings)
        + f"<h2>Nodes ({sum(1 for n in view.nodes if n.live)} live)</h2>"
        + nodes
        + f"<h2>Buckets ({report.num_buckets} in the plane)</h2>"
        + buckets
        + limits
        + rates
        + schedules
    )
    return layout(chrome, "nodes", "Nodes & buckets", body)


_WOULD = {
    ReconcileOutcome.LOST: "→ lost",
    ReconcileOutcome.REQUEUED: "→ back to the queue",
    ReconcileOutcome.ADOPTABLE: "reported (unchanged)",
    ReconcileOutcome.UNTOUCHED: "unchanged",
    ReconcileOutcome.LET_GO: "left as it is",
    ReconcileOutcome.RESUMED: "→ back to the queue (resumed)",
    ReconcileOutcome.WAITING: "unchanged (in the queue)",
}


def reconcile_page(chrome: Chrome, report: ReconcileReport) -> str:
    changes = [
        entry
        for entry in report.entries
        if entry.outcome
        in (ReconcileOutcome.LOST, ReconcileOutcome.REQUEUED, ReconcileOutcome.RESUMED)
    ]
    rows = [
        [
            f'<span class="badge">{entry.outcome.value}</span>',
            f'<a class="mono" href="{chrome.task_url(entry.task_id)}">{e(entry.task_id)}</a>',
            entry.was.value,
            _WOULD[entry.outcome] if report.dry_run else entry.outcome.value,
            f'<span class="text">{e(entry.owner or "-")}</span>',
            f'<span class="text">{e(entry.detail)}</span>',
        ]
        for entry in report.entries
    ]
    totals = ", ".join(f"{outcome.value} {len(report.of(outcome))}" for outcome in ReconcileOutcome)
    if report.dry_run:
        head = (
            "<h1>Reconcile — dry run</h1>"
            '<p class="notice">Nothing was written. Each unfinished task of this dashboard\'s '
            "buckets is judged by its owner's node lease; these would change: "
            f'<strong id="changes">{len(changes)}</strong>.</p>'
        )
        form = ""
        if not chrome.read_only:
            form = (
                f'<form method="post" action="{chrome.url("/reconcile")}" class="card">'
                + chrome.csrf_field()
                + '<input name="reason" placeholder="reason (kept in the history)" size="40" '
                'maxlength="500"> <button type="submit" id="do-reconcile" class="danger">'
                "Apply reconcile</button> "
                '<span class="muted">the tasks are judged again when you apply</span></form>'
            )
    else:
        head = f'<h1>Reconcile — applied</h1><p class="notice">{len(changes)} changed.</p>'
        form = f'<p><a href="{chrome.url("/reconcile")}">dry run again</a></p>'
    listing = (
        table(["outcome", "task", "was", "result", "owner", "detail"], rows)
        if rows
        else '<p class="muted">no unfinished task to judge</p>'
    )
    body = head + form + listing + f'<p class="muted">{totals} · at {when(report.at)} UTC</p>'
    return layout(chrome, "reconcile", "Reconcile", body)
