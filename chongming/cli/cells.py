"""How the views print what they all print: a time, an empty cell, tasks no worker serves.

Times are ISO-8601 in UTC to the second (a naive one is taken as UTC);
nothing is ``-``. Every command's table and JSON agree on these.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from chongming.render import escape_text

__all__ = ["NONE", "cell", "iso", "unserved_line"]

#: What an empty table cell shows.
NONE = "-"


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="seconds")


def cell(value: datetime | None) -> str:
    return iso(value) or NONE


def unserved_line(unserved: Mapping[str, int]) -> str:
    waiting = ", ".join(f"{name} ({count})" for name, count in sorted(unserved.items()))
    return f"    no worker serves {escape_text(waiting)}: those tasks wait, queued"
