"""The bounds of durable names and counts, shared by the task context and every store.

The task context checks a task's arguments with these before anything runs;
the stores check again on write, so a record is refused alike everywhere.
"""

from __future__ import annotations

from chongming.errors import PayloadError
from chongming.state.payload import check_json_value

__all__ = ["MAX_NAME", "MAX_RESUMES", "check_name"]

#: Longest name a task gives a step, a sleep or a fact (characters).
MAX_NAME = 200
#: The most resumes a durable task may be given (what every store's integer column holds).
MAX_RESUMES = 2**31 - 1


def check_name(value: object, what: str, *, longest: int = MAX_NAME) -> str:
    """Printable text of 1 to ``longest`` characters, or :class:`PayloadError` naming ``what``."""
    if not isinstance(value, str) or not value or len(value) > longest:
        raise PayloadError(what, f"must be a string of 1 to {longest} characters")
    check_json_value(value, what)
    if not value.isprintable():
        raise PayloadError(what, "must not contain control characters")
    return value
