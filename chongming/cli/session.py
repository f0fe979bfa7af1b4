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
    "open_cli_store",
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
    schema: str | None = None
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

    store = open_cli_store(options)
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


def open_cli_store(options: Options, *, create: bool = False) -> TaskStore:
    """The store ``--db`` names, unopened; a query never creates a database file.

    ``create`` (``run``) may create the embedded database file, but never a
    missing directory: a mistyped path must not leave an empty database behind.
    """
    from chongming.plane.location import describe_location, open_store
    from chongming.stores.sqlite import SqliteTaskStore

    location = options.db
    shown = describe_location(location)
    store = open_store(location)
    if options.schema is not None:
        if type(store).__name__ != "PostgresTaskStore":  # asyncpg is not imported for SQLite
            raise CliError(f"--schema applies to PostgreSQL only, not to --db {shown!r}")
        from chongming.stores.postgres import PostgresTaskStore

        store = PostgresTaskStore(location, schema=options.schema)
    if isinstance(store, SqliteTaskStore) and store.path != ":memory:":
        if os.path.isdir(store.path):
            raise CliError(f"--db {shown!r} is a directory, not a database")
        if not create and not os.path.exists(store.path):
            raise CliError(f"no chongming database at {shown!r} (check --db or CHONGMING_DB)")
        parent = os.path.dirname(os.path.abspath(store.path))
        if not os.path.isdir(parent):
            raise CliError(f"--db {shown!r}: directory {parent!r} does not exist")
    return store
