"""Which identity fields this process last wrote for each task, and at which version.

A task's identity (name, label, arguments, tags, ...; see
:data:`~chongming.stores.columns.IDENTITY_COLUMNS`) is fixed at ``create``
and almost never changes. When a save expects exactly the version this
process wrote, and carries the identity it wrote then, the stored row must
hold that identity too: the compare-and-set on ``status_version`` proves
nobody wrote the row since. Such a save then checks, encodes and writes only
the mutable columns. Anything else (a foreign write in between, a changed
identity, a task this process never wrote) writes the full row.

The proof assumes what the state machine guarantees: every state write
moves the version. A save that keeps the version forgets the entry.

Bounded: terminal tasks are dropped at once (they are not written again in
the normal course), and the oldest entries go first past ``size``.
"""

from __future__ import annotations

from typing import Any

from chongming.state.records import TaskSnapshot
from chongming.stores.columns import identity_of

__all__ = ["IdentityCache"]


class IdentityCache:
    """See the module docstring. Not thread-safe: one event loop uses it."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int = 50_000) -> None:
        self._entries: dict[str, tuple[tuple[Any, ...], int]] = {}
        self._size = size

    def __len__(self) -> int:
        return len(self._entries)

    def holds(self, snapshot: TaskSnapshot, expect_version: int) -> bool:
        """True when the stored row at ``expect_version`` has ``snapshot``'s identity."""
        entry = self._entries.get(snapshot.task_id)
        if entry is None or entry[1] != expect_version:
            return False
        return entry[0] == identity_of(snapshot)

    def remember(self, snapshot: TaskSnapshot, expect_version: int | None = None) -> None:
        """``snapshot`` was written (``expect_version``: by a save expecting that version)."""
        task_id = snapshot.task_id
        entries = self._entries
        if snapshot.status.is_terminal or snapshot.status_version == expect_version:
            entries.pop(task_id, None)
            return
        entries[task_id] = (identity_of(snapshot), snapshot.status_version)
        if len(entries) > self._size:
            del entries[next(iter(entries))]  # the first inserted: roughly the oldest task

    def forget(self, task_id: str) -> None:
        """The outcome of a write is unknown: the next save writes the full row."""
        self._entries.pop(task_id, None)
