"""One CLI command's life: resolve the store, open a query-only controller, do one thing.

Every command runs the event loop once (``asyncio.run``), opens a
:class:`~chongming.Controller` on the store that never submits (so it never
registers as a node and never claims commands), awaits one action, closes the
controller and returns what the action returned. Errors become one line on
stderr and exit code 1 (:class:`CliError`); ``--debug`` adds the traceback.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.stores.base import TaskStore

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_TASK_UNSUCCESSFUL",
    "CliError",
    "Options",
    "check_id",
    "one_line",
    "run_with_controller",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_TASK_UNSUCCESSFUL = 3

DEFAULT_DB = "./chongming.db"
DEFAULT_NUM_BUCKETS = 64
_MAX_MESSAGE = 500

T = TypeVar("T")


class CliError(Exception):
    """A command failed: its message is printed as one line, exit code 1."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """The global options, after parsing."""

    db: str = DEFAULT_DB
    num_buckets: int = DEFAULT_NUM_BUCKETS
    owned_buckets: frozenset[int] | None = None
    owner: str | None = None
    json: bool = False
    debug: bool = False


def one_line(text: str) -> str:
    """An error message as one printable line: escaped, and cut if it is very long."""
    from chongming.render.text import escape_text

    line = escape_text(" ".join(str(text).splitlines()))
    if len(line) > _MAX_MESSAGE:
        line = line[: _MAX_MESSAGE - 3] + "..."
    return line


def check_id(task_id: str) -> str:
    """A task id given on the command line, refused before the store is touched."""
    from chongming.errors import PayloadError
    from chongming.state.payload import check_task_id

    try:
        return check_task_id(task_id)
    except PayloadError as error:
        raise CliError(f"invalid task id: {error.reason}") from None


def run_with_controller(options: Options, action: Callable[[Controller], Awaitable[T]]) -> T:
    """Open a query-only controller on ``options.db``, await ``action`` with it, close it."""
    import asyncio

    return asyncio.run(_session(options, action))


async def _session(options: Options, action: Callable[[Controller], Awaitable[T]]) -> T:
    from chongming.controller.controller import Controller

    store = _open_store(options.db)
    controller = Controller(
        store=store,
        owner=options.owner,
        num_buckets=options.num_buckets,
        owned_buckets=options.owned_buckets,
    )
    try:
        return await action(controller)
    finally:
        await controller.close(close_store=True)


def _open_store(location: str) -> TaskStore:
    from chongming.control.location import describe_location, open_store
    from chongming.stores.sqlite import SqliteTaskStore

    store = open_store(location)
    if isinstance(store, SqliteTaskStore) and store.path != ":memory:":
        # A query must not leave an empty database behind a mistyped --db.
        if not os.path.exists(store.path):
            raise CliError(
                f"no chongming database at {describe_location(location)!r} "
                "(check --db or CHONGMING_DB)"
            )
        if os.path.isdir(store.path):
            raise CliError(f"--db {describe_location(location)!r} is a directory, not a database")
    return store
