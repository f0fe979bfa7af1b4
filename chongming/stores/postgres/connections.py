"""Connection housekeeping and write comparison for the PostgreSQL store.

Small functions the store's plumbing uses: dropping a connection that failed,
closing a pool without hanging, and telling whether a stored row is our own
write (after a connection error left its outcome unknown).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import Any

from chongming.state.payload import json_form
from chongming.state.records import TaskSnapshot

__all__ = ["as_stored", "close_connection", "close_pool", "discard", "keep_session", "same_write"]

log = logging.getLogger("chongming.stores.postgres")


def discard(conn: Any) -> None:
    # A proxy whose connection already died was detached by the pool: nothing to do.
    with contextlib.suppress(Exception):
        if not conn.is_closed():
            conn.terminate()


def same_write(stored: TaskSnapshot, ours: TaskSnapshot) -> bool:
    """Is ``stored`` the write of ``ours``? (touch may have changed the hot fields since).

    Compared in JSON form, as every store returns payloads: a tuple comes back
    as a list and ``{1: "a"}`` as ``{"1": "a"}``, and that is still our write.
    """
    comparable = dataclasses.replace(
        stored, progress=ours.progress, last_heartbeat_at=ours.last_heartbeat_at
    )
    return comparable == as_stored(ours)


def as_stored(snapshot: TaskSnapshot) -> TaskSnapshot:
    """``snapshot`` with its payloads in the JSON form a read returns."""
    return dataclasses.replace(
        snapshot,
        result=json_form(snapshot.result, "result", None),
        args=tuple(json_form(list(snapshot.args), "args", None)),
        kwargs=json_form(dict(snapshot.kwargs), "kwargs", None),
    )


async def close_pool(pool: Any, timeout: float) -> None:
    """Graceful close, falling back to terminate when it fails or is cancelled."""
    try:
        async with asyncio.timeout(timeout):
            await pool.close()
    except asyncio.CancelledError:
        pool.terminate()
        raise
    except Exception as error:
        log.warning("closing the PostgreSQL pool failed (%s); terminating", type(error).__name__)
        pool.terminate()


async def keep_session(conn: Any) -> None:
    """The reset of a connection given back to the store's own pool: none needed.

    asyncpg's default runs ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` on every release: one more round trip per statement. The
    store's pooled connections hold no session state (no advisory locks,
    cursors, LISTEN or SET: the listener has its own connection, and every
    name is schema-qualified); asyncpg still rolls back an open transaction
    before calling this. A pool passed in by the caller keeps its own reset.
    """


async def close_connection(conn: Any) -> None:
    """Close a connection of the store's own (the listener's), terminating it if that fails."""
    try:
        async with asyncio.timeout(2.0):
            await conn.close()
    except asyncio.CancelledError:
        conn.terminate()
        raise
    except Exception:
        conn.terminate()
