"""The journal section of a task's page: its runs, steps, waits and facts as one timeline.

Same rules as :mod:`chongming.web.pages`: every value from the store (step
and fact names, previews, senders, triggers) goes through
:func:`~chongming.web.pages.e`; previews are cut before they are escaped
(:data:`~chongming.web.journal.PREVIEW_CHARS`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from chongming.web.journal import MAX_ENTRIES, Journal, JournalEntry, preview
from chongming.web.pages import e, when

__all__ = ["journal_section"]

_MARK = {
    "transition": "",
    "run": "run",
    "step": "step",
    "sleep": "wait",
    "fact-wait": "wait",
    "fact-decided": "fact",
    "effect": "effect",
    "fact-sent": "fact",
}


def _precise(value: datetime) -> str:
    """A journal time to the millisecond (steps of one run are often within a second)."""
    shown = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return shown.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _entry(entry: JournalEntry) -> str:
    css = [_MARK.get(entry.kind, ""), "" if entry.ok else "bad"]
    if entry.kind == "transition" and entry.transition is not None:
        t = entry.transition
        if t.to_status.is_terminal:
            css.append("end")
        reason = f' — <span class="text">{e(t.reason)}</span>' if t.reason else ""
        meta = (
            f"v{t.version} · {when(t.at)} · trigger <code>{e(t.trigger)}</code> · actor "
            f'<span class="text">{e(t.actor)}</span> · attempt {t.attempt}'
        )
        head = f"<strong>{e(entry.title)}</strong>{reason}"
    else:
        head = f"<strong>{e(entry.title)}</strong>"
        if entry.detail:
            head += f' — <span class="text">{e(entry.detail)}</span>'
        where = []
        if entry.at is not None:
            where.append(when(entry.at) if entry.kind == "run" else _precise(entry.at))
        if entry.epoch is not None and entry.kind != "run":
            where.append(f"recorded by epoch {entry.epoch}")
        if entry.seq is not None:
            where.append(f"#{entry.seq} in the journal")
        meta = " · ".join(where)
    shown = f'<pre class="mono text preview">{e(entry.preview)}</pre>' if entry.preview else ""
    return (
        f'<li class="{" ".join(c for c in css if c)}" data-kind="{e(entry.kind)}">{head}'
        f'<div class="meta">{meta}</div>{shown}</li>'
    )


def _sent(journal: Journal, name: str) -> str:
    at = journal.fact_times.get(name)
    return "not kept by this store" if at is None else _precise(at)


def _facts(journal: Journal) -> str:
    if not journal.facts:
        return '<p class="muted">no fact was sent to this task</p>'
    rows = "".join(
        "<tr>"
        f'<td class="text">{e(fact.name)}</td>'
        f'<td class="text">{e(fact.key or "-")}</td>'
        f"<td>{_sent(journal, fact.name)}</td>"
        f'<td><pre class="mono text preview">{e(preview(fact.payload))}</pre></td>'
        "</tr>"
        for fact in journal.facts
    )
    return (
        '<table class="facts-sent"><thead><tr><th>fact</th><th>sent by (key)</th>'
        f"<th>sent at (UTC)</th><th>payload</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def journal_section(journal: Journal) -> str:
    """The ``<h2>Journal</h2>`` part of a task's page (says so when the task has none)."""
    if not journal.durable:
        return (
            '<h2>Journal</h2><p class="muted" id="no-journal">this task has no journal: it is '
            "not durable, or it has not started yet</p>"
        )
    lost = sum(1 for run in journal.runs if run.lost)
    summary = (
        f"{journal.steps} step(s) · {journal.effects} effect(s) · {len(journal.runs)} run(s)"
        + (f" · {lost} lost" if lost else "")
        + f" · epoch now {journal.epoch}"
    )
    more = (
        f'<p class="muted">{journal.hidden_steps} more step(s) not shown (the first '
        f"{MAX_ENTRIES} are)</p>"
        if journal.hidden_steps
        else ""
    )
    items = "".join(_entry(entry) for entry in journal.entries)
    return (
        f'<h2>Journal <span class="muted">{summary}</span></h2>'
        '<p class="muted">Steps and effects are placed in the run whose epoch recorded them, '
        "in the order the store recorded them; a step's time is when it was recorded (how "
        "long it ran is not stored).</p>"
        f'<ol class="timeline journal" id="journal">{items}</ol>'
        + more
        + "<h3>Facts</h3>"
        + _facts(journal)
    )
