"""The filter used by stores and the controller to list tasks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from chongming.errors import ConfigurationError
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus

__all__ = ["TaskQuery"]

#: Buckets are stored as 32-bit integers (PostgreSQL ``integer``).
_MAX_BUCKET = (1 << 31) - 1
#: ``LIMIT`` takes a signed 64-bit integer on SQLite and PostgreSQL.
_MAX_LIMIT = (1 << 63) - 1
_VALID_STATUSES = ", ".join(status.value for status in TaskStatus)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskQuery:
    """Which tasks to list. A field left ``None`` matches everything.

    ``statuses`` takes :class:`TaskStatus` members or their values
    (``{"running", "paused"}``) and ``buckets`` takes bucket numbers; both
    are kept as frozensets, and an empty one matches nothing. A bare string
    is refused for ``statuses``: ``frozenset("running")`` would be a set of
    letters that matches nothing, silently. Every field is checked here so
    that every store answers the same query the same way, or refuses it with
    the same :class:`~chongming.ConfigurationError`.

    Results are ordered by ``created_at`` then ``task_id`` so every store
    returns the same order.
    """

    statuses: frozenset[TaskStatus] | None = None
    tag: str | None = None
    bucket: int | None = None
    buckets: frozenset[int] | None = None
    name: str | None = None
    owner: str | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.statuses is not None:
            object.__setattr__(self, "statuses", _statuses(self.statuses))
        for field in ("tag", "name", "owner"):
            value = getattr(self, field)
            if value is not None:
                _check_text(field, value)
        if self.bucket is not None:
            _check_bucket("bucket", self.bucket)
        if self.buckets is not None:
            object.__setattr__(self, "buckets", _buckets(self.buckets))
        if self.limit is not None and (
            isinstance(self.limit, bool)
            or not isinstance(self.limit, int)
            or not 1 <= self.limit <= _MAX_LIMIT
        ):
            raise ConfigurationError(
                f"TaskQuery.limit must be a positive integer below 2**63, got {_shown(self.limit)}"
            )

    def matches(self, snapshot: TaskSnapshot) -> bool:
        """The reference semantics every store must reproduce."""
        if self.statuses is not None and snapshot.status not in self.statuses:
            return False
        if self.tag is not None and self.tag not in snapshot.tags:
            return False
        if self.bucket is not None and snapshot.bucket != self.bucket:
            return False
        if self.buckets is not None and snapshot.bucket not in self.buckets:
            return False
        if self.name is not None and snapshot.name != self.name:
            return False
        return self.owner is None or snapshot.owner == self.owner


def _statuses(value: object) -> frozenset[TaskStatus]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigurationError(
            "TaskQuery.statuses must be a collection of statuses, e.g. "
            f"{{TaskStatus.RUNNING}} or {{'running'}}, got {_shown(value)}"
        )
    statuses: set[TaskStatus] = set()
    for member in value:
        if isinstance(member, TaskStatus):
            statuses.add(member)
            continue
        try:
            statuses.add(TaskStatus(member))
        except ValueError:
            raise ConfigurationError(
                f"TaskQuery.statuses holds {_shown(member)}, which is no status; "
                f"valid statuses: {_VALID_STATUSES}"
            ) from None
    return frozenset(statuses)


def _check_text(field: str, value: object) -> None:
    """A string every store can compare: no NUL (PostgreSQL) and valid UTF-8 (both)."""
    if not isinstance(value, str):
        raise ConfigurationError(f"TaskQuery.{field} must be a string, got {_shown(value)}")
    if "\x00" in value:
        raise ConfigurationError(f"TaskQuery.{field} contains a NUL character: {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError(
                f"TaskQuery.{field} contains a lone surrogate: {value!r}"
            ) from None


def _check_bucket(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_BUCKET:
        raise ConfigurationError(
            f"TaskQuery.{field} must hold bucket numbers (integers >= 0), got {_shown(value)}"
        )


def _buckets(value: object) -> frozenset[int]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"TaskQuery.buckets must be a collection of bucket numbers, got {_shown(value)}"
        )
    members = list(value)
    for bucket in members:  # before hashing: {1, True} would collapse into {1}
        _check_bucket("buckets", bucket)
    return frozenset(members)


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # e.g. an int past sys.get_int_max_str_digits(); keep the real error
        text = f"<unprintable {type(value).__name__}>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"
