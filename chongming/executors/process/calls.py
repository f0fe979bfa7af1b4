"""The calls that start, signal and reap worker processes, made safe to use from a loop.

``multiprocessing`` keeps its own book of children and reads a fork-server
child's exit status from a pipe: two threads reaping at once (a start runs
``_cleanup()``, which reaps too) would make one of them block, or invent exit
code 255. So every ``Process.start()``, exit-status read and ``close()`` of
the executor runs in a thread of the loop's default executor, one at a time
under :data:`PROCESS_CALLS`, and the loop thread never calls them.

Every worker started is remembered until it is reaped; at interpreter exit
the ones nobody closed are killed with their process groups. That must come
before ``multiprocessing``'s own exit hook joins its children: a worker waits
for its next job as long as its pipe is open, so that join would never
return. An ``atexit`` hook cannot promise the order (``multiprocessing``
registers its hook when it is first used, and again whenever its logger is
made, and the last registered runs first), so the kill is also one of the
finalizers that hook runs before it joins anything. The workers are this
process's: a process forked from it forgets them, so its exit kills none.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import multiprocessing.util
import os
import signal
import threading
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = [
    "PROCESS_CALLS",
    "finish_despite_cancellation",
    "forget_worker",
    "reap_process",
    "remember_worker",
    "settle",
    "signal_group",
    "start_process",
]

T = TypeVar("T")

PROCESS_CALLS = threading.Lock()
_LIVE: set[int] = set()  # pids of workers not reaped yet
_OWNER = os.getpid()  # the process that started them (a fork's copy of the set is not its own)


def remember_worker(pid: int) -> None:
    _LIVE.add(pid)


def forget_worker(pid: int) -> None:
    _LIVE.discard(pid)


def signal_group(pid: int | None, number: int, *, alive: bool) -> None:
    """Send ``number`` to the process group ``pid`` leads (to ``pid`` itself before its setsid).

    ``alive`` says the process is not reaped yet, so ``pid`` is still ours
    and may be signalled directly when it has no group of its own yet.
    """
    if pid is None:
        return
    try:
        os.killpg(pid, number)
        return
    except ProcessLookupError:
        pass  # no such group: gone already, or the worker has not called setsid yet
    except PermissionError:
        return  # not ours to signal
    if alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, number)


def start_process(process: Any) -> None:
    """``process.start()``: a fork/exec, or a round trip to the fork server (in a thread).

    The worker is remembered at once, so an exit that comes before the loop
    hears of it kills it too.
    """
    with PROCESS_CALLS:
        process.start()
        if process.pid is not None:
            remember_worker(process.pid)


def reap_process(process: Any) -> int | None:
    """The exit status, then ``close()``; in a thread, where a short wait harms nobody.

    The sentinel closes as the process exits, a moment before ``waitpid``
    can collect it (spawn), hence the retries. ``None`` if it never could.
    """
    deadline = time.monotonic() + 2.0
    while True:
        with PROCESS_CALLS:
            exitcode: int | None = process.exitcode
            if exitcode is not None:
                process.close()
                return exitcode
        if time.monotonic() > deadline:
            return None
        time.sleep(0.001)


async def settle(future: asyncio.Future[Any]) -> None:
    """Wait for ``future`` to end whatever cancellations arrive (the caller re-raises them)."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(future)


async def finish_despite_cancellation(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` to its end; a cancellation that arrived meanwhile is re-raised then."""
    future = asyncio.ensure_future(awaitable)
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            cancelled = True
        except Exception:
            break
    if cancelled:
        if not future.cancelled():
            future.exception()  # retrieved: the cancellation is what the caller hears of
        raise asyncio.CancelledError
    return future.result()


def _kill_live_workers() -> None:
    """Interpreter exit: SIGKILL the group of every worker nobody closed.

    Each once: the second hook to run finds none left, so it cannot signal a
    pid that a fork server reaped meanwhile and the system gave to another.
    """
    if os.getpid() != _OWNER:
        return
    while _LIVE:
        signal_group(_LIVE.pop(), signal.SIGKILL, alive=True)


def _forget_in_child() -> None:
    global _OWNER
    _OWNER = os.getpid()
    _LIVE.clear()


# Before multiprocessing joins its children (its finalizers of priority >= 0 run
# first), and, should its hook not run at all, at exit anyway.
multiprocessing.util.Finalize(None, _kill_live_workers, exitpriority=100)
atexit.register(_kill_live_workers)
os.register_at_fork(after_in_child=_forget_in_child)
