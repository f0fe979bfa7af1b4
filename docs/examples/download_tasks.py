"""The task module of docs/examples/durable_download.py (``--tasks download_tasks``).

``copy-download`` waits for the fact that a download finished, copies the
file in chunks (one memoised step per chunk, a checkpoint between), then
records the copy in a business table through ``ctx.effect``: its commit runs
in the store's own transaction, so the row exists exactly once however many
workers die on the way.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from chongming import Controller, EffectInfo, TaskContext

CHUNK = 64 * 1024


def copy_chunk(source: str, target: str, index: int) -> int:
    """Copy chunk ``index`` (idempotent: it writes the same bytes at the same place)."""
    with open(source, "rb") as src, open(target, "r+b" if os.path.exists(target) else "wb") as dst:
        src.seek(index * CHUNK)
        data = src.read(CHUNK)
        dst.seek(index * CHUNK)
        dst.write(data)
    hold = float(os.environ.get("DOWNLOAD_CHUNK_SECONDS", "0"))
    if hold:
        import time

        time.sleep(hold)  # a slow disk: room for the example to kill a worker mid-copy
    return len(data)


def finished_copy(info: EffectInfo, target: str, size: int) -> dict[str, Any]:
    # An external system would get info.idempotency_key; a local file needs nothing more.
    return {"path": target, "bytes": size, "key": info.idempotency_key}


def record_copy(conn: sqlite3.Connection, result: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO copies (op, path, bytes) VALUES (?, ?, ?)",
        (result["key"], result["path"], result["bytes"]),
    )


async def copy_download(ctx: TaskContext, target: str) -> dict[str, Any]:
    fact = await ctx.wait_for_fact("download-finished", timeout=600)
    source, size = fact["path"], fact["bytes"]
    copied = 0
    for index in range((size + CHUNK - 1) // CHUNK):
        await ctx.checkpoint()  # stop and pause take effect between chunks
        copied += await ctx.step("chunk", copy_chunk, source, target, index)
        ctx.progress(copied, total=size, unit="bytes")
    recorded: dict[str, Any] = await ctx.effect(
        "record-copy", finished_copy, target, copied, commit=record_copy
    )
    return recorded


def register(controller: Controller) -> None:
    controller.register("copy-download", copy_download, durable=True)
