"""Plain-text tables in the seed's format: the task list and a task's history.

Pure functions from records to a string: the caller passes ``now``, so the
same snapshots always render the same text (and tests need no clock).

Format: left-aligned columns separated by two spaces, a header row, a row of
dashes as wide as each column, then one row per record; the last column is
not padded, so no line ends in spaces. Widths count terminal cells, so a
Chinese label (two cells per character) still lines up. Every cell is
escaped with :func:`~chongming.render.text.escape_text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from chongming.errors import ConfigurationError
from chongming.render.text import display_width, escape_text
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import CARRIER_STATUSES, TaskStatus

__all__ = ["render_history", "render_rows", "render_table", "summary_line", "summary_of_counts"]

_SEPARATOR = "  "
_NONE = "-"

TASK_HEADERS = ("TASK_ID", "NAME", "STATUS", "ATTEMPT", "ELAPSED", "PROGRESS", "FAILURE")
TASK_HEADERS_WITH_BUCKET = (
    "TASK_ID",
    "NAME",
    "BUCKET",
    "STATUS",
    "ATTEMPT",
    "ELAPSED",
    "PROGRESS",
    "FAILURE",
)
HISTORY_HEADERS = ("VER", "FROM", "TO", "AT", "TRIGGER", "ACTOR", "REASON")


def render_rows(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A header, an underline of dashes and the rows, with every cell escaped.

    Every row must have as many cells as there are headers.
    """
    header_cells = [escape_text(header) for header in headers]
    body = [[escape_text(cell) for cell in row] for row in rows]
    count = len(header_cells)
    for index, row in enumerate(body):
        if len(row) != count:
            raise ConfigurationError(f"row {index} has {len(row)} cells, expected {count}")
    widths = [display_width(cell) for cell in header_cells]
    for row in body:
        for column, cell in enumerate(row):
            width = display_width(cell)
            if width > widths[column]:
                widths[column] = width
    lines = [
        _line(header_cells, widths),
        _line(["-" * width for width in widths], widths),
    ]
    lines.extend(_line(row, widths) for row in body)
    return "\n".join(lines)


def render_table(
    snapshots: Sequence[TaskSnapshot],
    *,
    now: datetime | None = None,
    show_bucket: bool | None = None,
    summary: bool = True,
    matching: Mapping[TaskStatus, int] | None = None,
    waiting: Mapping[str, str] | None = None,
) -> str:
    """The task list: ``TASK_ID NAME [BUCKET] STATUS ATTEMPT ELAPSED PROGRESS FAILURE``.

    The BUCKET column appears when any task has a bucket, unless
    ``show_bucket`` forces it on or off. ``now`` is used for the elapsed time of
    tasks that have not finished (default: the wall clock, read once).
    ``matching``: tasks per status of every match when only some are shown
    (a limit): the summary counts those and says how many rows it shows.
    ``waiting``: why a queued task waits, by task id (shown beside its status:
    ``queued (sleeping until …)``; see :mod:`chongming.plane.waiting`).
    """
    if now is None:
        now = datetime.now(UTC)
    with_bucket = (
        any(snapshot.bucket is not None for snapshot in snapshots)
        if show_bucket is None
        else show_bucket
    )
    headers = TASK_HEADERS_WITH_BUCKET if with_bucket else TASK_HEADERS
    why = waiting or {}
    rows = [
        _task_row(snapshot, now, with_bucket, why.get(snapshot.task_id)) for snapshot in snapshots
    ]
    text = render_rows(headers, rows)
    if summary and matching is None:
        text = f"{text}\n{summary_line(snapshots)}"
    elif summary and matching is not None:
        shown, total = len(snapshots), sum(matching.values())
        line = summary_of_counts(matching)
        if shown < total:
            line = f"{line}; {shown} of {total} matching tasks shown"
        text = f"{text}\n{line}"
    return text


def summary_line(snapshots: Iterable[TaskSnapshot]) -> str:
    """``    active 4 (queued 2, holding a slot 2)``.

    *active* counts every task not in a terminal state; *holding a slot*
    counts the states that occupy an execution slot (starting, running,
    pausing, paused, stopping), so a paused task shows up there.
    """
    counts: dict[TaskStatus, int] = {}
    for snapshot in snapshots:
        counts[snapshot.status] = counts.get(snapshot.status, 0) + 1
    return summary_of_counts(counts)


def summary_of_counts(counts: Mapping[TaskStatus, int]) -> str:
    """:func:`summary_line` from tasks per status (every match of a limited listing)."""
    active = queued = holding = 0
    for status, count in counts.items():
        if status.is_terminal:
            continue
        active += count
        if status is TaskStatus.QUEUED:
            queued += count
        elif status in CARRIER_STATUSES:
            holding += count
    return f"    active {active} (queued {queued}, holding a slot {holding})"


def render_history(transitions: Iterable[Transition]) -> str:
    """A task's history: ``VER FROM TO AT TRIGGER ACTOR REASON``.

    ``AT`` is ISO 8601 in UTC to the second (``2026-10-02T14:01:23+00:00``);
    a naive datetime is taken to be UTC already, as the state machine writes.
    """
    rows = [
        (
            str(transition.version),
            transition.from_status.value,
            transition.to_status.value,
            _timestamp(transition.at),
            transition.trigger,
            transition.actor,
            transition.reason or _NONE,
        )
        for transition in transitions
    ]
    return render_rows(HISTORY_HEADERS, rows)


def _task_row(
    snapshot: TaskSnapshot, now: datetime, with_bucket: bool, waiting: str | None = None
) -> list[str]:
    elapsed = snapshot.elapsed(now)
    row = [
        snapshot.task_id,
        snapshot.label or snapshot.name,
        snapshot.status.value if waiting is None else f"{snapshot.status.value} ({waiting})",
        f"{snapshot.attempt}/{snapshot.max_attempts}",
        _NONE if elapsed is None else f"{elapsed:.1f}s",
        _NONE if snapshot.progress is None else snapshot.progress.render(),
        _NONE if snapshot.failure is None else snapshot.failure.kind.value,
    ]
    if with_bucket:
        row.insert(2, _NONE if snapshot.bucket is None else str(snapshot.bucket))
    return row


def _timestamp(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="seconds")


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    last = len(cells) - 1
    parts = [
        cell if column == last else cell + " " * (widths[column] - display_width(cell))
        for column, cell in enumerate(cells)
    ]
    return _SEPARATOR.join(parts)
