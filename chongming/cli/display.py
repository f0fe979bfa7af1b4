"""What ``chongming run`` shows while its task runs: a live line, or plain lines.

All terminal output happens on one display thread that owns stdout while the
task runs: a terminal that blocks (scrolled back, ``Ctrl-S``) must never stall
the event loop that carries the task and its heartbeats. The loop hands the
thread immutable snapshots and notes; the thread keeps only the newest
snapshot, so a slow terminal skips frames instead of queueing them.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from chongming.render.text import escape_text

if TYPE_CHECKING:
    from chongming.state.records import Failure, TaskSnapshot

__all__ = ["Display", "describe_failure", "describe_snapshot"]

_FRAME_SECONDS = 0.1
#: Progress-only plain lines are written at most this often (status changes always are).
_PLAIN_PROGRESS_EVERY = 1.0
_MESSAGE_CELLS = 60


class Display:
    """The display thread of one ``run``. ``show``/``note`` never block; ``close`` joins."""

    def __init__(self, *, live: bool, stream: IO[str] | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdout
        self._live = live
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._main, name="chongming-cli-display", daemon=True
        )
        self._thread.start()

    def show(self, snapshot: TaskSnapshot) -> None:
        self._inbox.put(("snapshot", snapshot))

    def note(self, text: str) -> None:
        """A line printed above the live line (or between the plain lines)."""
        self._inbox.put(("note", text))

    def close(self) -> None:
        """Render the last snapshot and end the thread (blocking: call it off the loop)."""
        self._inbox.put(("close", None))
        self._thread.join()

    def _main(self) -> None:
        if self._live:
            _LiveLine(self._stream, self._inbox).run()
        else:
            _PlainLines(self._stream, self._inbox).run()


class _LiveLine:
    """One rich progress line, redrawn ten times a second by this thread only."""

    def __init__(self, stream: IO[str], inbox: queue.SimpleQueue[tuple[str, Any]]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

        self._inbox = inbox
        console = Console(file=stream, highlight=False)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[amount]}", markup=False),
            TextColumn("{task.fields[elapsed]}", markup=False),
            TextColumn("{task.fields[message]}", markup=False),
            console=console,
            auto_refresh=False,
            transient=False,
        )
        self._bar = self._progress.add_task(
            "starting", total=None, amount="", elapsed="", message=""
        )

    def run(self) -> None:
        latest: TaskSnapshot | None = None
        with self._progress:
            while True:
                try:
                    kind, item = self._inbox.get(timeout=_FRAME_SECONDS)
                except queue.Empty:
                    self._draw(latest)
                    continue
                if kind == "snapshot":
                    latest = item
                elif kind == "note":
                    self._progress.console.print(escape_text(item), markup=False)
                else:
                    self._draw(latest)
                    return

    def _draw(self, snapshot: TaskSnapshot | None) -> None:
        if snapshot is not None:
            progress = snapshot.progress
            total = progress.total if progress is not None else None
            done = progress.done if progress is not None else 0
            if snapshot.status.value == "succeeded" and total is not None:
                done = max(done, total)
            self._progress.update(
                self._bar,
                description=_headline(snapshot),
                total=total,
                completed=done,
                amount=escape_text(progress.render()) if progress is not None else "",
                elapsed=_elapsed(snapshot),
                message=_message(snapshot),
            )
        self._progress.refresh()


class _PlainLines:
    """A line per status change, and per progress change at most once a second."""

    def __init__(self, stream: IO[str], inbox: queue.SimpleQueue[tuple[str, Any]]) -> None:
        self._stream = stream
        self._inbox = inbox
        self._last_status: str | None = None
        self._last_key: object = None
        self._last_written = 0.0

    def run(self) -> None:
        while True:
            kind, item = self._inbox.get()
            if kind == "snapshot":
                self._maybe_write(item)
            elif kind == "note":
                self._write(escape_text(item))
            else:
                return

    def _maybe_write(self, snapshot: TaskSnapshot) -> None:
        # Elapsed time alone is no news: a paused task prints one line, not one a second.
        key = (snapshot.status, snapshot.attempt, snapshot.progress, snapshot.failure)
        if key == self._last_key:
            return
        now = time.monotonic()
        changed = snapshot.status.value != self._last_status or snapshot.failure is not None
        if not changed and now - self._last_written < _PLAIN_PROGRESS_EVERY:
            return
        self._last_status = snapshot.status.value
        self._last_key = key
        self._last_written = now
        self._write(describe_snapshot(snapshot))

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


def describe_snapshot(snapshot: TaskSnapshot) -> str:
    """``<task_id>  <status>  <progress>  <elapsed>  <message>``, escaped, for plain output."""
    parts = [escape_text(snapshot.task_id), snapshot.status.value]
    if snapshot.max_attempts > 1:
        parts.append(_attempt(snapshot))
    if snapshot.progress is not None:
        parts.append(escape_text(snapshot.progress.render()))
    elapsed = _elapsed(snapshot)
    if elapsed:
        parts.append(elapsed)
    message = _message(snapshot)
    if message:
        parts.append(message)
    return "  ".join(parts)


def _headline(snapshot: TaskSnapshot) -> str:
    head = f"{escape_text(snapshot.task_id)}  {snapshot.status.value}"
    return f"{head}  {_attempt(snapshot)}" if snapshot.max_attempts > 1 else head


def _attempt(snapshot: TaskSnapshot) -> str:
    return f"attempt {max(snapshot.attempt, 1)}/{snapshot.max_attempts}"


def describe_failure(failure: Failure) -> str:
    """``<kind>: [<exception type>: ]<message>``, unescaped."""
    if failure.exception_type and failure.exception_type not in failure.message:
        return f"{failure.kind.value}: {failure.exception_type}: {failure.message}"
    return f"{failure.kind.value}: {failure.message}"


def _elapsed(snapshot: TaskSnapshot) -> str:
    seconds = snapshot.elapsed(datetime.now(UTC))
    return "" if seconds is None else f"{seconds:.1f}s"


def _message(snapshot: TaskSnapshot) -> str:
    if snapshot.failure is not None:
        text = describe_failure(snapshot.failure)
    elif snapshot.progress is not None and snapshot.progress.message:
        text = snapshot.progress.message
    else:
        return ""
    text = escape_text(" ".join(text.splitlines()))
    return text if len(text) <= _MESSAGE_CELLS else text[: _MESSAGE_CELLS - 3] + "..."
