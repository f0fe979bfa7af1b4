"""Task functions for the process-executor tests: a worker imports them by name."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Any

from chongming import TaskCancelled, TaskContext


def add(ctx: TaskContext, a: int, b: int) -> int:
    return a + b


def where(ctx: TaskContext) -> int:
    return os.getpid()


def segfault(ctx: TaskContext) -> None:
    ctypes.string_at(0)


def hard_exit(ctx: TaskContext, code: int) -> None:
    os._exit(code)


def exit_quietly(ctx: TaskContext) -> None:
    sys.exit(0)


def count(ctx: TaskContext, n: int) -> int:
    total = 0
    for i in range(n):
        ctx.checkpoint()
        total += i
    return total


def checkpoint_forever(ctx: TaskContext) -> None:
    while True:
        ctx.checkpoint()
        time.sleep(0.001)


def sleep_without_checkpoint(ctx: TaskContext, seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def fail(ctx: TaskContext, text: str) -> None:
    raise ValueError(text)


def not_json(ctx: TaskContext) -> Any:
    return {1, 2}


def progress_and_log(ctx: TaskContext, n: int) -> str:
    for i in range(1, n + 1):
        ctx.checkpoint()
        ctx.progress(i, total=n, message=f"step {i}")
    ctx.log("done %d steps", n)
    (ctx.artifact_dir / "out.txt").write_text("ok")
    return str(ctx.artifact_dir)


async def async_count(ctx: TaskContext, n: int) -> int:
    total = 0
    for i in range(n):
        await ctx.checkpoint()
        total += i
    return total


# -- targets a worker cannot import (refused at submit) -------------------------------

doubled = lambda ctx, x: x * 2  # noqa: E731 - a lambda, on purpose


class Counter:
    def bump(self, ctx: TaskContext) -> int:
        return 1

    def __call__(self, ctx: TaskContext) -> int:
        return 1


counter = Counter()


def make_closure(offset: int) -> Any:
    def shifted(ctx: TaskContext, x: int) -> int:
        return x + offset

    return shifted


def killed_from_outside(ctx: TaskContext) -> None:
    """What the kernel's out-of-memory killer does to a process over its memory limit."""
    os.kill(os.getpid(), signal.SIGKILL)


# -- stop, pause and timeouts -----------------------------------------------------------


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _write_atomically(path: str, text: str) -> None:
    temporary = f"{path}.part"
    with open(temporary, "w") as file:
        file.write(text)
    os.replace(temporary, path)


def deaf_parent(ctx: TaskContext, pid_file: str) -> None:
    """Ignores SIGTERM, never checkpoints, and starts two `sleep 300` that ignore it too."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    children = [subprocess.Popen(["sleep", "300"]) for _ in range(2)]
    _write_atomically(
        pid_file, " ".join(str(pid) for pid in [os.getpid(), *[c.pid for c in children]])
    )
    while True:
        time.sleep(0.05)


def deaf_sleeper(ctx: TaskContext, seconds: float) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(seconds)


def record_stop(ctx: TaskContext, path: str) -> None:
    """Checkpoints until stopped; writes the moment it left its checkpoint (monotonic)."""
    try:
        while True:
            ctx.checkpoint()
            time.sleep(0.0005)
    except TaskCancelled:
        _write_atomically(path, repr(time.monotonic()))
        raise


def step_until_released(ctx: TaskContext, release: str) -> int:
    """One step (and one progress report) per checkpoint until the file ``release`` exists."""
    steps = 0
    while not os.path.exists(release):
        ctx.checkpoint()
        steps += 1
        ctx.progress(steps)
        time.sleep(0.002)
    return steps


def quiet_after_checkpoints(ctx: TaskContext, seconds: float) -> None:
    for _ in range(3):
        ctx.checkpoint()
    time.sleep(seconds)


# -- the context across the boundary ----------------------------------------------------


class Flaky(Exception):
    """Raised by `flaky` until its attempt number reaches `succeed_at`."""


def flaky(ctx: TaskContext, succeed_at: int) -> int:
    if ctx.attempt < succeed_at:
        raise Flaky(f"attempt {ctx.attempt}")
    return ctx.attempt


def identity(ctx: TaskContext) -> dict[str, Any]:
    return {"task_id": ctx.task_id, "name": ctx.name, "attempt": ctx.attempt, "pid": os.getpid()}


def log_with_error(ctx: TaskContext) -> None:
    ctx.log("starting %s", ctx.task_id)
    try:
        raise KeyError("missing")
    except KeyError:
        ctx.logger.exception("it went wrong")
    ctx.logger.debug("debug is filtered by the parent's level")


def misuse_checkpoint(ctx: TaskContext) -> None:
    ctx.checkpoint().__await__()  # awaiting a sync checkpoint is a misuse


def returns_nan(ctx: TaskContext) -> float:
    return float("nan")


async def async_until_released(ctx: TaskContext, release: str) -> int:
    import asyncio

    steps = 0
    while not _exists(release):
        await ctx.checkpoint()
        steps += 1
        ctx.progress(steps)
        await asyncio.sleep(0.002)
    return steps


def echo(ctx: TaskContext, value: Any) -> Any:
    return value


def watch_stop_flag(ctx: TaskContext) -> str:
    """Never checkpoints: looks at ``ctx.is_stop_requested`` instead (then returns)."""
    deadline = time.monotonic() + 30
    while not ctx.is_stop_requested:
        if time.monotonic() > deadline:
            return "never saw it"
        time.sleep(0.001)
    return "saw the stop"


def checkpoint_and_report(ctx: TaskContext, path: str, other: int) -> None:
    """Writes its own pid and ``other``'s, then checkpoints until stopped."""
    _write_atomically(path, f"{other} {os.getpid()}")
    while True:
        ctx.checkpoint()
        time.sleep(0.001)


def checkpoint_for(ctx: TaskContext, seconds: float) -> int:
    """Checkpoints as fast as it can for ``seconds``; returns how many times."""
    deadline = time.monotonic() + seconds
    checkpoints = 0
    while time.monotonic() < deadline:
        ctx.checkpoint()
        checkpoints += 1
    return checkpoints


# -- interpreter exit and forks ---------------------------------------------------------


def leave_a_sleeper(ctx: TaskContext) -> list[int]:
    """Starts a `sleep 300` in the worker's process group and returns: [worker, sleeper]."""
    sleeper = subprocess.Popen(["sleep", "300"])
    return [os.getpid(), sleeper.pid]


def fork_and_wait(ctx: TaskContext, how: str) -> dict[str, Any]:
    """Forks a child that ends the task function its own way (never ``os._exit``); waits for it.

    ``how``: ``"return"``, ``"raise"``, ``"exit"`` (``sys.exit(3)``),
    ``"report"`` (progress, a log record and a checkpoint first, then return)
    or ``"libc"`` (forked by C's ``fork()``, which runs no Python fork hook,
    then return).
    """
    child = ctypes.PyDLL(None).fork() if how == "libc" else os.fork()
    if child == 0:
        if how == "raise":
            raise ValueError("raised in the forked child")
        if how == "exit":
            sys.exit(3)
        if how == "report":
            ctx.progress(1, total=2, message="from the forked child")
            ctx.log("logged in the forked child")
            ctx.checkpoint()
        return {"value": "the forked child's"}
    _, status = os.waitpid(child, 0)
    return {"value": "the worker's", "child_exit": os.waitstatus_to_exitcode(status)}


def fork_and_leave(ctx: TaskContext, release: str) -> int:
    """Forks a child that returns once the file ``release`` exists; returns its pid at once."""
    child = os.fork()
    if child == 0:
        while not os.path.exists(release):
            time.sleep(0.005)
        return -1
    return child


async def async_exit(ctx: TaskContext, code: int) -> None:
    await ctx.checkpoint()
    sys.exit(code)


def interrupt(ctx: TaskContext) -> None:
    raise KeyboardInterrupt


async def async_fork_and_wait(ctx: TaskContext) -> dict[str, Any]:
    """Forks on the worker's loop; the child returns; then the worker awaits a thread."""
    import asyncio

    child = os.fork()
    if child == 0:
        return {"value": "the forked child's"}
    # A thread's result wakes the loop through its self-pipe.
    _, status = await asyncio.to_thread(os.waitpid, child, 0)
    value = await asyncio.to_thread(str, "the worker's")
    await ctx.checkpoint()
    return {"value": value, "child_exit": os.waitstatus_to_exitcode(status)}


def spawn_then_crash(ctx: TaskContext, pid_file: str) -> None:
    """Starts a `sleep 300` in the worker's process group, writes its pid, and segfaults."""
    sleeper = subprocess.Popen(["sleep", "300"])
    _write_atomically(pid_file, str(sleeper.pid))
    ctypes.string_at(0)


def trace_id_of(ctx: TaskContext) -> str | None:
    return ctx.trace_id
