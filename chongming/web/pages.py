"""The dashboard's HTML: pure functions from records to escaped markup.

Every string that comes from a task, a node or a form — ids, labels, names,
reasons, failure messages, owners, tags — goes through :func:`e`: first the
terminal-safe escaping of :func:`~chongming.render.escape_text` (control
characters and bidi overrides such as U+202E become visible ``\\u202e``),
then HTML escaping. Markup is built only from literals and those escaped
values; the Content-Security-Policy of the app forbids inline scripts as a
second line of defence.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from chongming.controller.stored_pipelines import PIPELINE_TASK
from chongming.plane.waiting import WaitingReason
from chongming.render.text import escape_text
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.web.board import CONTROLS, ListFilter, TaskPage, TaskView
from chongming.web.diagram import state_svg

__all__ = [
    "Chrome",
    "block",
    "e",
    "layout",
    "list_body",
    "list_page",
    "login_page",
    "message_page",
    "task_body",
    "task_page",
    "when",
]

_NAV = (
    ("tasks", "/", "Tasks"),
    ("charts", "/charts", "Charts"),
    ("nodes", "/nodes", "Nodes & buckets"),
)
_NAV_RECONCILE = ("reconcile", "/reconcile", "Reconcile")


def e(value: object) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes."""
    return html.escape(escape_text(str(value)), quote=True)


def block(value: object) -> str:
    """Like :func:`e` for multi-line text (JSON, messages): line breaks stay line breaks."""
    return "\n".join(e(line) for line in str(value).split("\n"))


def when(value: datetime | None) -> str:
    if value is None:
        return "-"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def badge(status: TaskStatus) -> str:
    return f'<span class="badge {status.value}">{status.value}</span>'


class Chrome:
    """What every page needs: the mount prefix, the store shown, the CSRF token, the mode."""

    __slots__ = ("base", "csrf", "read_only", "store", "token_required")

    def __init__(
        self, *, base: str, store: str, csrf: str, read_only: bool, token_required: bool
    ) -> None:
        self.base = base
        self.store = store
        self.csrf = csrf
        self.read_only = read_only
        self.token_required = token_required

    def url(self, path: str, params: Mapping[str, str] | None = None) -> str:
        query = f"?{urlencode(params)}" if params else ""
        return html.escape(f"{self.base}{path}{query}", quote=True)

    def task_url(self, task_id: str) -> str:
        return self.url(f"/tasks/{quote(task_id, safe='')}")

    def csrf_field(self) -> str:
        return f'<input type="hidden" name="csrf" value="{e(self.csrf)}">'


def layout(chrome: Chrome, here: str, title: str, body: str) -> str:
    nav = list(_NAV) if chrome.read_only else [*_NAV, _NAV_RECONCILE]
    links = "".join(
        f'<a href="{chrome.url(path)}"{" class=here" if key == here else ""}>{label}</a>'
        for key, path, label in nav
    )
    mode = " · read-only" if chrome.read_only else ""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} · chongming</title>"
        f'<link rel="stylesheet" href="{chrome.url("/static/dashboard.css")}">'
        f'<script defer src="{chrome.url("/static/dashboard.js")}"></script>'
        "</head><body>"
        f'<header><span class="brand">chongming</span>{links}'
        f'<span class="store">store: {e(chrome.store)}{mode}</span></header>'
        f"<main>{body}</main></body></html>"
    )


# -- the list -----------------------------------------------------------------------


def _filters(chrome: Chrome, wanted: ListFilter) -> str:
    options = ["active", "all", *(status.value for status in TaskStatus)]
    select = "".join(
        f'<option value="{value}"{" selected" if value == wanted.status else ""}>{value}</option>'
        for value in options
    )

    def field(name: str, label: str, value: object) -> str:
        shown = "" if value is None else e(value)
        return (
            f'<label>{label}<input name="{name}" value="{shown}" size="14" '
            f'autocomplete="off"></label>'
        )

    return (
        f'<form class="filters" method="get" action="{chrome.url("/")}">'
        f'<label>status<select name="status">{select}</select></label>'
        + field("name", "name", wanted.name)
        + field("tag", "tag", wanted.tag)
        + field("owner", "owner", wanted.owner)
        + field("bucket", "bucket", wanted.bucket)
        + _search_fields(wanted, field)
        + '<button type="submit">Filter</button>'
        f'<a href="{chrome.url("/")}">clear</a></form>'
    )


def _search_fields(wanted: ListFilter, field: Callable[[str, str, object], str]) -> str:
    terms = wanted.search.params() if wanted.search is not None else {}
    return "".join(
        field(name, label, terms.get(name))
        for name, label in (("label", "label has"), ("key", "idempotency key"))
    ) + "".join(
        f'<label>{label}<input name="{name}" value="{e(terms.get(name, ""))}" size="22" '
        f'placeholder="2026-12-01T12:00" autocomplete="off"></label>'
        for name, label in (("from", "created from (UTC)"), ("to", "created before"))
    )


def _progress(snapshot: TaskSnapshot) -> str:
    progress = snapshot.progress
    if progress is None:
        return "-"
    unit = f" {e(progress.unit)}" if progress.unit else ""
    if progress.total:
        done = max(0.0, min(progress.done, progress.total))
        return (
            f'<progress value="{done:g}" max="{progress.total:g}"></progress> '
            f"{progress.done:g}/{progress.total:g}{unit}"
        )
    return f"{progress.done:g}{unit}"


def _attempt(snapshot: TaskSnapshot) -> str:
    return f"{snapshot.attempt}/{snapshot.max_attempts}"


def _waiting(reason: WaitingReason | None) -> str:
    """Why a queued task waits, beside its badge (nothing when it does not)."""
    if reason is None:
        return ""
    return f' <span class="muted text waiting">{e(reason.describe())}</span>'


def list_body(chrome: Chrome, page: TaskPage) -> str:
    """The live part of the list: the counts, the rows and the pager."""
    wanted = page.filter
    counts = "".join(
        f'<a href="{chrome.url("/", {"status": status})}">'
        f'<span class="badge {status}">{status} {count:,}</span></a>'
        for status, count in sorted(page.counts.items())
    )
    rows = []
    for snapshot in page.tasks:
        failure = snapshot.failure
        rows.append(
            "<tr>"
            f'<td class="mono"><a href="{chrome.task_url(snapshot.task_id)}">'
            f"{e(snapshot.task_id)}</a></td>"
            f'<td class="text">{e(snapshot.name)}</td>'
            f'<td class="text">{e(snapshot.label)}</td>'
            f"<td>{badge(snapshot.status)}{_waiting(page.waiting.get(snapshot.task_id))}</td>"
            f'<td class="num">{_attempt(snapshot)}</td>'
            f"<td>{_progress(snapshot)}</td>"
            f'<td class="text">{e(snapshot.owner or "-")}</td>'
            f'<td class="num">{"-" if snapshot.bucket is None else snapshot.bucket}</td>'
            f'<td class="text">{e(", ".join(sorted(snapshot.tags)) or "-")}</td>'
            f"<td>{when(snapshot.created_at)}</td>"
            f'<td class="text">{e(failure.message) if failure else "-"}</td>'
            "</tr>"
        )
    if not rows:
        rows.append('<tr><td colspan="11" class="muted">no tasks match</td></tr>')
    pager = []
    if wanted.page > 1:
        previous = chrome.url("/", wanted.params(page=wanted.page - 1))
        pager.append(f'<a href="{previous}">← previous</a>')
    pager.append(f'<span class="muted">page {wanted.page}</span>')
    if page.has_next:
        pager.append(f'<a href="{chrome.url("/", wanted.params(page=wanted.page + 1))}">next →</a>')
    return (
        f'<div class="counts">{counts}</div>'
        "<table><thead><tr><th>task</th><th>name</th><th>label</th><th>status</th>"
        "<th>attempt</th><th>progress</th><th>owner</th><th>bucket</th><th>tags</th>"
        "<th>created (UTC)</th><th>failure</th></tr></thead>"
        f'<tbody id="task-rows">{"".join(rows)}</tbody></table>'
        f'<div class="pager">{"".join(pager)}</div>'
    )


def list_page(chrome: Chrome, page: TaskPage) -> str:
    fragment = chrome.url("/fragments/tasks", page.filter.params())
    body = (
        '<h1>Tasks <span id="live-state" class="live">live</span></h1>'
        + _filters(chrome, page.filter)
        + f'<div id="live" data-live="{fragment}" data-every="2000">{list_body(chrome, page)}</div>'
    )
    return layout(chrome, "tasks", "Tasks", body)


# -- one task -----------------------------------------------------------------------


def _json(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 4000:
        text = text[:4000] + " …"
    return block(text)


def _timeline(history: Sequence[Transition]) -> str:
    items = []
    for step in history:
        css = "end" if step.to_status.is_terminal else ("user" if step.actor != "system" else "")
        reason = f' — <span class="text">{e(step.reason)}</span>' if step.reason else ""
        items.append(
            f'<li class="{css}" data-version="{step.version}">'
            f"<strong>{step.from_status.value} → {step.to_status.value}</strong>{reason}"
            f'<div class="meta">v{step.version} · {when(step.at)} · '
            f'trigger <code>{e(step.trigger)}</code> · actor <span class="text">'
            f"{e(step.actor)}</span> · attempt {step.attempt}</div></li>"
        )
    return f'<ol class="timeline">{"".join(items)}</ol>'


def _facts(snapshot: TaskSnapshot, waiting: WaitingReason | None = None) -> str:
    facts: list[tuple[str, str]] = [
        ("status", badge(snapshot.status) + _waiting(waiting)),
        ("name", e(snapshot.name) + (f"@{snapshot.version}" if snapshot.version else "")),
        ("label", f'<span class="text">{e(snapshot.label)}</span>'),
        ("attempt", _attempt(snapshot)),
        ("progress", _progress(snapshot)),
        ("owner", e(snapshot.owner or "-")),
        ("bucket", "-" if snapshot.bucket is None else str(snapshot.bucket)),
        ("tags", e(", ".join(sorted(snapshot.tags)) or "-")),
        ("priority", str(snapshot.priority)),
        ("created", when(snapshot.created_at)),
        ("queued", when(snapshot.queued_at)),
        ("started", when(snapshot.started_at)),
        ("finished", when(snapshot.finished_at)),
        ("heartbeat", when(snapshot.last_heartbeat_at)),
        ("version", str(snapshot.status_version)),
    ]
    if snapshot.progress is not None and snapshot.progress.message:
        facts.insert(5, ("message", f'<span class="text">{e(snapshot.progress.message)}</span>'))
    if snapshot.args or snapshot.kwargs:
        arguments = {"args": list(snapshot.args), "kwargs": dict(snapshot.kwargs)}
        facts.append(("arguments", f'<pre class="mono text">{_json(arguments)}</pre>'))
    if snapshot.result is not None:
        facts.append(("result", f'<pre class="mono text">{_json(snapshot.result)}</pre>'))
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"


def _failure(snapshot: TaskSnapshot) -> str:
    failure = snapshot.failure
    if failure is None:
        return ""
    kind = f"{failure.kind.value}" + (
        f" ({e(failure.exception_type)})" if failure.exception_type else ""
    )
    retry = "retryable" if failure.retryable else "not retryable"
    return (
        '<div class="card failure"><h2>Failure</h2>'
        f"<p><strong>{kind}</strong> · {retry}</p>"
        f'<pre class="mono text">{block(failure.message)}</pre></div>'
    )


def _commands(view: TaskView) -> str:
    if not view.commands:
        return '<p class="muted">no commands sent to this task</p>'
    rows = "".join(
        "<tr>"
        f"<td>{when(record.command.created_at)}</td>"
        f"<td>{e(record.command.kind.value)}</td>"
        f'<td class="text">{e(record.command.actor)}</td>'
        f'<td class="text">{e(record.command.reason or "-")}</td>'
        f'<td class="text">{e(record.command.target_owner or "any node")}</td>'
        f"<td>{e(record.state.value)}</td>"
        f'<td class="text">{e(record.outcome or "-")}</td>'
        "</tr>"
        for record in view.commands
    )
    return (
        "<table><thead><tr><th>at (UTC)</th><th>kind</th><th>actor</th><th>reason</th>"
        "<th>addressed to</th><th>state</th><th>outcome</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _sibling(task_id: str) -> str:
    """A link to another task's page, relative to this one's (``/tasks/<id>``), so
    it holds under any base path and inside the live fragment alike."""
    return f'<a href="./{e(quote(task_id, safe=""))}" class="text">{e(task_id)}</a>'


def _family(view: TaskView) -> str:
    """Its parent and its children (``ctx.child`` / ``ctx.spawn``), when it has either."""
    if view.parent is None and not view.children:
        return ""
    parts = ['<h2>Family</h2><div class="card" id="family">']
    if view.snapshot.name == PIPELINE_TASK:  # a stored pipeline's coordinator
        graph = f"../pipelines/{e(quote(view.snapshot.task_id, safe=''))}"
        parts.append(f'<p>a stored pipeline: <a href="{graph}">its nodes as a graph</a></p>')
    if view.parent is not None:
        parts.append(f"<p>child of {_sibling(view.parent)}</p>")
    if view.children:
        rows = "".join(
            f"<tr><td>{_sibling(child.task_id)}</td><td>{e(child.name)}</td>"
            f"<td>{badge(child.status)}</td><td>{when(child.finished_at)}</td></tr>"
            for child in view.children
        )
        more = f'<p class="muted">and {view.more_children} more</p>' if view.more_children else ""
        parts.append(
            f"<p>{len(view.children) + view.more_children} children</p>"
            "<table><thead><tr><th>task</th><th>name</th><th>status</th>"
            f"<th>finished (UTC)</th></tr></thead><tbody>{rows}</tbody></table>{more}"
        )
    parts.append("</div>")
    return "".join(parts)


def task_body(view: TaskView) -> str:
    """The live part of a task's page."""
    from chongming.web.journal_page import journal_section  # it builds on this module

    snapshot = view.snapshot
    terminal = "1" if snapshot.is_terminal else "0"
    return (
        f'<div class="card" data-terminal="{terminal}" data-status="{snapshot.status.value}">'
        f"{_facts(snapshot, view.waiting)}</div>"
        + _failure(snapshot)
        + "<h2>State machine</h2>"
        + state_svg(snapshot.status, view.history)
        + f"<h2>History ({len(view.history)} transitions)</h2>"
        + _timeline(view.history)
        + _family(view)
        + journal_section(view.journal)
        + "<h2>Commands</h2>"
        + _commands(view)
    )


def _controls(chrome: Chrome, snapshot: TaskSnapshot) -> str:
    if chrome.read_only:
        return ""
    forms = []
    for kind in CONTROLS:
        danger = ' class="danger"' if kind == "stop" else ""
        forms.append(
            f'<form method="post" action="{chrome.url("/control")}">'
            + chrome.csrf_field()
            + f'<input type="hidden" name="task_id" value="{e(snapshot.task_id)}">'
            f'<input type="hidden" name="kind" value="{kind}">'
            f'<input name="reason" placeholder="reason" size="18" maxlength="500" '
            f'id="reason-{kind}">'
            f'<button type="submit" id="do-{kind}"{danger}>{kind.capitalize()}</button></form>'
        )
    hidden = " hidden" if snapshot.is_terminal else ""
    return f'<div class="card controls" id="controls"{hidden}>{"".join(forms)}</div>'


def task_page(chrome: Chrome, view: TaskView, notice: str | None = None) -> str:
    snapshot = view.snapshot
    fragment = chrome.url(f"/fragments/tasks/{quote(snapshot.task_id, safe='')}")
    shown = f'<div class="notice" id="notice">{e(notice)}</div>' if notice else ""
    body = (
        f'<h1>Task <span class="mono">{e(snapshot.task_id)}</span> '
        '<span id="live-state" class="live">live</span></h1>'
        + shown
        + _controls(chrome, snapshot)
        + f'<div id="live" data-live="{fragment}" data-every="1000">{task_body(view)}</div>'
    )
    return layout(chrome, "tasks", f"Task {snapshot.task_id}", body)


# -- small pages --------------------------------------------------------------------


def message_page(chrome: Chrome, title: str, message: str, *, css: str = "error") -> str:
    body = f'<h1>{e(title)}</h1><div class="{css}">{e(message)}</div>'
    return layout(chrome, "", title, body)


def login_page(chrome: Chrome, failed: bool = False) -> str:
    error = '<div class="error">that token is not right</div>' if failed else ""
    body = (
        "<h1>Sign in</h1>" + error + "<p>This dashboard needs its token "
        "(<code>CHONGMING_DASHBOARD_TOKEN</code> or <code>--token-file</code>).</p>"
        f'<form method="post" action="{chrome.url("/login")}">'
        '<input type="password" name="token" autocomplete="current-password" size="40">'
        ' <button type="submit">Sign in</button></form>'
    )
    return layout(chrome, "", "Sign in", body)


def table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A table of cells that are already markup (escape them first)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
