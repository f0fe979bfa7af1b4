"""What the capability mixins of the SQLite store call on it (declarations for the type checker).

:class:`~chongming.stores.sqlite.store.SqliteTaskStore` owns the connections,
the group-commit writer and the store clock; each capability module
(``core.py``, ``commands.py``, ``queue.py``, ``limits.py``, ``durable.py``)
holds a mixin that reaches them only through the names declared here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chongming.state.records import TaskSnapshot
    from chongming.stores.identity import IdentityCache
    from chongming.stores.sqlite.batch import WriteOp
    from chongming.stores.sqlite.commands import ClaimLook
    from chongming.stores.sqlite.writer import Writer

__all__ = ["SqliteInternals"]


class SqliteInternals:
    """The store's plumbing as its mixins see it (defined by ``SqliteTaskStore``)."""

    _limit: int | None
    _path: str
    _memory: bool
    _closed: bool
    _writer: Writer | None
    _hint: asyncio.Event | None
    _identities: IdentityCache
    _looks: dict[str, ClaimLook]
    claims_skipped: int

    if TYPE_CHECKING:

        async def open(self) -> None: ...

        async def get(self, task_id: str) -> TaskSnapshot | None: ...

        def _now_micros(self) -> int: ...

        async def _write(self, op: WriteOp) -> Any: ...

        def _future(self) -> asyncio.Future[Any]: ...

        async def _read(self, sql: str, params: Sequence[Any] = ()) -> Iterable[Any]: ...

        async def _node_op(self, action: str, *params: Any) -> Any: ...

        async def _guarded_now(self) -> int: ...

        def _wake_hint_waiters(self) -> None: ...
