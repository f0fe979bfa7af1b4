"""Hostile text in tables: nothing reaches the terminal raw."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

import pytest

from chongming.render import display_width, escape_text, render_history, render_table
from chongming.state import Failure, FailureKind, Progress, TaskSnapshot, TaskStatus, Transition

NOW = datetime(2026, 10, 2, 14, 1, 30, tzinfo=UTC)

HOSTILE = [
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # ANSI colour
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # OSC: set the window title
    ("\x9b2J", "\\x9b2J"),  # C1 CSI: clear screen
    ("a\x7fb", "a\\x7fb"),  # DEL
    ("two\nlines\r", "two\\nlines\\r"),
    ("tab\there", "tab\\there"),
    ("invoice\u202egnp.exe", "invoice\\u202egnp.exe"),  # RTL override
    ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
    ("sep\u2028arator\u2029", "sep\\u2028arator\\u2029"),
    ("tag\U000e0041", "tag\\U000e0041"),  # Cf outside the BMP
    ("lone\ud800", "lone\\ud800"),
]


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_escape_text(raw: str, shown: str) -> None:
    assert escape_text(raw) == shown


@pytest.mark.parametrize(
    "text",
    ["plain", "转换-1", "café", "e\u0301", "A-同步", "back\\slash", "emoji 🎉", "全角　空格"],
)
def test_printable_text_is_unchanged(text: str) -> None:
    assert escape_text(text) == text


def test_display_width() -> None:
    assert display_width("abc") == 3
    assert display_width("转换-1") == 6
    assert display_width("ｆｕｌｌ") == 8  # fullwidth forms
    assert display_width("e\u0301") == 1  # combining accent takes no cell
    assert display_width("é") == 1


def _is_unsafe(char: str) -> bool:
    return unicodedata.category(char) in {"Cc", "Cf", "Zl", "Zp", "Cs"} and char != "\n"


def test_hostile_snapshot_fields_are_escaped_in_the_table() -> None:
    snapshots = [
        TaskSnapshot(
            task_id=f"id\u202e{index}",
            name="evil",
            label=raw,
            status=TaskStatus.FAILED,
            status_version=3,
            attempt=1,
            max_attempts=1,
            created_at=NOW,
            updated_at=NOW,
            progress=Progress(done=1, total=2, unit="\x1b[5m"),
            failure=Failure(kind=FailureKind.EXCEPTION, message="\x1b[2J"),
        )
        for index, (raw, _) in enumerate(HOSTILE)
    ]
    text = render_table(snapshots, now=NOW)
    assert not any(_is_unsafe(char) for char in text)
    lines = text.splitlines()
    assert len(lines) == 2 + len(HOSTILE) + 1  # no row was split by a newline
    for (_, shown), line in zip(HOSTILE, lines[2:], strict=False):
        assert shown in line
    assert "1/2 \\x1b[5m" in lines[2]
    # Columns still line up: STATUS starts at the same cell on every row.
    status_starts = {display_width(line[: line.index("failed")]) for line in lines[2:-1]}
    assert len(status_starts) == 1


def test_hostile_reason_and_trigger_are_escaped_in_history() -> None:
    transition = Transition(
        task_id="x",
        version=1,
        from_status=TaskStatus.RUNNING,
        to_status=TaskStatus.STOPPING,
        at=NOW,
        trigger="user:stop\x1b[8m",
        actor="mallory\u202e",
        reason="because\x1b[2J\nreally",
    )
    text = render_history([transition])
    assert not any(_is_unsafe(char) for char in text)
    row = text.splitlines()[2]
    assert "user:stop\\x1b[8m" in row
    assert "mallory\\u202e" in row
    assert row.endswith("because\\x1b[2J\\nreally")
