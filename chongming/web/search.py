"""The list's search fields: a label part, an idempotency key, a creation time range.

Parsed from the query string (``label``, ``key``, ``from``, ``to``) and
checked here: a bad value is a :class:`~chongming.web.board.BadInput` (400)
naming the parameter and what it takes, never a 500. The store answers
them with ``search_tasks`` (:mod:`chongming.stores.search`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime

from chongming.stores.search import MAX_SEARCH_TEXT

__all__ = ["SearchTerms", "parse_moment"]

_EXAMPLE = "ISO 8601, e.g. 2026-12-01T12:00 or 2026-12-01T12:00:00+00:00; UTC when no offset"


class _Refused(ValueError):
    """Raised as the board's BadInput by the caller (this module does not import the board)."""


def parse_moment(name: str, text: str) -> datetime:
    """``text`` as an aware datetime (naive means UTC), or ``ValueError`` naming ``name``."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise _Refused(f"{name} is not a date and time ({_EXAMPLE}): {text[:40]!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _text(params: Mapping[str, str], name: str) -> str | None:
    value = (params.get(name) or "").strip()
    if not value:
        return None
    if len(value) > MAX_SEARCH_TEXT or "\x00" in value:
        raise _Refused(f"{name} must be at most {MAX_SEARCH_TEXT} characters without NUL")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused(f"{name} holds a lone surrogate") from None
    return value


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchTerms:
    label: str | None = None
    key: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> SearchTerms | None:
        """The terms in ``params``, ``None`` when there are none; ``ValueError`` when bad."""
        moments: dict[str, datetime | None] = {}
        for name in ("from", "to"):
            text = _text(params, name)
            moments[name] = None if text is None else parse_moment(name, text)
        start, end = moments["from"], moments["to"]
        if start is not None and end is not None and start >= end:
            raise _Refused("from must be before to")
        terms = cls(
            label=_text(params, "label"),
            key=_text(params, "key"),
            created_from=start,
            created_to=end,
        )
        return None if terms == cls() else terms

    def params(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.label is not None:
            out["label"] = self.label
        if self.key is not None:
            out["key"] = self.key
        if self.created_from is not None:
            out["from"] = self.created_from.isoformat()
        if self.created_to is not None:
            out["to"] = self.created_to.isoformat()
        return out
