"""The filter used by stores and the controller to list tasks."""

from __future__ import annotations

import dataclasses

from chongming.errors import ConfigurationError
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus

__all__ = ["TaskQuery"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskQuery:
    """Which tasks to list. Empty fields match everything.

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
        if self.limit is not None and self.limit <= 0:
            raise ConfigurationError(f"limit must be positive, got {self.limit}")
        if self.statuses is not None and not isinstance(self.statuses, frozenset):
            object.__setattr__(self, "statuses", frozenset(self.statuses))
        if self.buckets is not None and not isinstance(self.buckets, frozenset):
            object.__setattr__(self, "buckets", frozenset(self.buckets))

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
