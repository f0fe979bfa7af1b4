"""Task module of the durable kill -9 proof: ``--tasks tests.cli.durable_tasks``.

``ten_steps`` runs ten memoised steps; each appends ``<task> <step> <epoch>
<pid>`` to a ledger file (one ``O_APPEND`` write) and then takes a moment,
so a worker killed at a random instant is killed inside some step or
between two. The ledger counts real executions; the store says which
attempt's epoch recorded each step. When given a ``table`` (in the store's
own database), each step is followed by an operation through ``ctx.effect``
whose commit inserts one row there: exactly once per step, whatever the kills.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import time
from typing import Any

from chongming import Controller, EffectInfo, FencingError, TaskContext

STEPS = 10


def _mark(ledger: str, line: str, hold: float) -> str:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    time.sleep(hold)
    return line


def _row(info: EffectInfo) -> str:
    return info.idempotency_key


def _commit_into(table: str) -> Any:
    def commit(conn: Any, key: str) -> Any:
        sql = f"INSERT INTO {table} (op) VALUES ($1)"
        if isinstance(conn, sqlite3.Connection):
            conn.execute(sql.replace("$1", "?"), (key,))
            return None
        return conn.execute(sql, key)  # asyncpg: the store awaits it in its transaction

    return commit


async def ten_steps(
    ctx: TaskContext, ledger: str, hold: float = 0.05, table: str | None = None
) -> list[str]:
    assert ctx.journal is not None
    done = []
    for n in range(STEPS):
        await ctx.checkpoint()
        line = f"{ctx.task_id} s{n} {ctx.journal.epoch} {os.getpid()}"
        done.append(await ctx.step(f"s{n}", _mark, ledger, line, hold))
        if table is not None:
            await ctx.effect(f"row:{n}", _row, commit=_commit_into(table))
    return done


def _slow_effect(info: EffectInfo, ledger: str, hold: float) -> str:
    _mark(ledger, f"effect {info.idempotency_key} {os.getpid()}", hold)
    return info.idempotency_key


async def five_effects(ctx: TaskContext, ledger: str, table: str, hold: float = 0.3) -> int:
    """Five operations whose bodies take ``hold`` seconds: room to freeze a worker inside one."""
    for n in range(5):
        await ctx.step(f"before:{n}", _mark, ledger, f"step {ctx.task_id} {n} {os.getpid()}", 0)
        try:
            await ctx.effect(f"row:{n}", _slow_effect, ledger, hold, commit=_commit_into(table))
        except FencingError:
            # A zombie's heartbeat and progress must not land either: report some and
            # stay alive for many progress intervals before giving up.
            ctx.progress(99, total=5, message=f"zombie {os.getpid()}")
            for _ in range(20):
                await ctx.checkpoint()
                await asyncio.sleep(0.05)
            _mark(ledger, f"fenced {ctx.task_id}:row:{n} {os.getpid()}", 0)
            raise
    return 5


def _exit(code: int) -> None:
    sys.exit(code)


async def exits(ctx: TaskContext, code: int) -> None:
    """An async task that raises SystemExit: it must fail, not end the worker's loop."""
    raise SystemExit(code)


async def exits_in_a_step(ctx: TaskContext, code: int) -> None:
    """A durable task whose plain step calls sys.exit() on a worker thread."""
    await ctx.step("exit", _exit, code)


def register(controller: Controller) -> None:
    controller.register("exits", exits)
    controller.register("exits_in_a_step", exits_in_a_step, durable=True)
    controller.register("ten_steps", ten_steps, durable=True, max_resumes=1000)
    controller.register("five_effects", five_effects, durable=True, max_resumes=10)
