"""A task search: a :class:`~chongming.state.query.TaskQuery` and the fields the dashboard adds.

``label`` matches a part of the label (case-sensitive: every store compares
the same way), ``idempotency_key`` the key a task was enqueued with (exact),
``created_from`` / ``created_to`` a creation time range (from inclusive, to
exclusive). Checked here so that every store answers or refuses alike.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from chongming.errors import ConfigurationError
from chongming.state.query import TaskQuery
from chongming.state.records import TaskSnapshot

__all__ = ["MAX_SEARCH_TEXT", "TaskSearch"]

#: The longest label part or key a search takes (characters).
MAX_SEARCH_TEXT = 1000


def _text(field: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"TaskSearch.{field} must be a non-empty string")
    if len(value) > MAX_SEARCH_TEXT or "\x00" in value:
        raise ConfigurationError(
            f"TaskSearch.{field} must be at most {MAX_SEARCH_TEXT} characters without NUL"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"TaskSearch.{field} contains a lone surrogate") from None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskSearch:
    """Which tasks to list: ``query`` and the fields below (``None``: any)."""

    query: TaskQuery = dataclasses.field(default_factory=TaskQuery)
    label: str | None = None
    idempotency_key: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.query, TaskQuery):
            raise ConfigurationError("TaskSearch.query must be a TaskQuery")
        for field in ("label", "idempotency_key"):
            value = getattr(self, field)
            if value is not None:
                _text(field, value)
        for field in ("created_from", "created_to"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise ConfigurationError(f"TaskSearch.{field} must be a timezone-aware datetime")
        if (
            self.created_from is not None
            and self.created_to is not None
            and self.created_from >= self.created_to
        ):
            raise ConfigurationError("TaskSearch.created_from must be before created_to")

    def matches(self, snapshot: TaskSnapshot) -> bool:
        """The reference semantics every store must reproduce."""
        if not self.query.matches(snapshot):
            return False
        if self.label is not None and self.label not in snapshot.label:
            return False
        if self.idempotency_key is not None and snapshot.idempotency_key != self.idempotency_key:
            return False
        if self.created_from is not None and snapshot.created_at < self.created_from:
            return False
        return self.created_to is None or snapshot.created_at < self.created_to
