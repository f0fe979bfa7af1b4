"""``chongming run``: one registered task in the foreground, written through to the store.

The process is a node for as long as its task runs: the task's transitions,
progress and heartbeats reach the store, so other terminals see it and can
pause, resume or stop it with their own ``chongming`` commands (this
controller polls the store for them). ``Ctrl-C`` (or ``SIGTERM``) is a stop
request that the task gets the stop grace window to honour; a second one
forces the stop at once, and the record says what that really did (a thread
that never reaches a checkpoint cannot be killed, so it is recorded ``lost``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import sys
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

from chongming.cli.display import Display, describe_failure
from chongming.cli.session import (
    EXIT_OK,
    EXIT_TASK_UNSUCCESSFUL,
    Options,
    open_cli_store,
)
from chongming.cli.task_modules import register_tasks

if TYPE_CHECKING:
    from chongming.run.task_run import TaskRun
    from chongming.state.records import TaskSnapshot

__all__ = ["RunRequest", "run_in_foreground"]

#: How often this node looks for pause/resume/stop commands from other processes.
POLL_INTERVAL = 0.2
_FRAME_SECONDS = 0.1
_RESULT_CHARS = 500


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """What ``run`` was asked to start, already checked."""

    module: ModuleType
    name: str
    kwargs: dict[str, Any]
    task_id: str | None = None
    bucket_key: str | None = None
    label: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RunResult:
    exit_code: int
    snapshot: TaskSnapshot


def run_in_foreground(options: Options, request: RunRequest, *, live: bool) -> RunResult:
    """Run the task to its end; the exit code is 0 only if it succeeded."""
    return asyncio.run(_run(options, request, live=live))


async def _run(options: Options, request: RunRequest, *, live: bool) -> RunResult:
    from chongming.controller.controller import Controller

    store = open_cli_store(options, create=True)
    controller = Controller(
        store=store,
        owner=options.owner,
        num_buckets=options.num_buckets,
        owned_buckets=options.owned_buckets,
        poll_interval=POLL_INTERVAL,
    )
    try:
        await register_tasks(request.module, controller)
        # An unknown name or arguments that do not fit fail before the store is opened.
        controller.registry.get(request.name).bind_check((), request.kwargs)
        run = await controller.submit(
            request.name,
            task_id=request.task_id,
            label=request.label,
            bucket_key=request.bucket_key,
            **request.kwargs,
        )
        # With --json the progress goes to stderr: stdout holds one JSON document.
        stream = sys.stderr if options.json else sys.stdout
        snapshot = await _follow(run, live=live and not options.json, stream=stream)
    finally:
        await controller.close(close_store=True)
    code = EXIT_OK if snapshot.status.value == "succeeded" else EXIT_TASK_UNSUCCESSFUL
    return RunResult(code, snapshot)


async def _follow(run: TaskRun, *, live: bool, stream: IO[str]) -> TaskSnapshot:
    """Show the task until it ends, turning SIGINT/SIGTERM into stop, then forced stop."""
    display = Display(live=live, stream=stream)
    interrupts = _Interrupts(run, display)
    loop = asyncio.get_running_loop()
    watched = [sig for sig in (signal.SIGINT, signal.SIGTERM) if _can_watch(loop, sig)]
    for sig in watched:
        loop.add_signal_handler(sig, interrupts.received, sig)
    ended = asyncio.ensure_future(run.wait())
    try:
        while not ended.done():
            display.show(run.snapshot)
            await asyncio.wait([ended], timeout=_FRAME_SECONDS)
        ended.result()
        final = run.snapshot
        display.show(final)
    finally:
        for sig in watched:
            loop.remove_signal_handler(sig)
        if not ended.done():
            ended.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ended
        await interrupts.aclose()
        await asyncio.to_thread(display.close)
    return final


class _Interrupts:
    """The first signal asks the task to stop; the next one forces it."""

    def __init__(self, run: TaskRun, display: Display) -> None:
        self._run = run
        self._display = display
        self._count = 0
        self._pending: set[asyncio.Task[bool]] = set()

    def received(self, sig: signal.Signals) -> None:
        self._count += 1
        what = "Ctrl-C" if sig is signal.SIGINT else sig.name
        if self._count == 1:
            grace = self._run.windows.stop_grace
            self._display.note(
                f"{what}: stop requested; the task has {grace:g}s to end "
                f"(press Ctrl-C again to force)"
            )
            self._spawn(self._run.stop(reason=f"{what} in the terminal running it"))
        elif self._count == 2:
            self._display.note(f"{what} again: forcing the stop now")
            self._spawn(self._run.force_stop(reason=f"{what} twice in the terminal running it"))

    def _spawn(self, request: Any) -> None:
        task = asyncio.ensure_future(request)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def aclose(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)


def _can_watch(loop: asyncio.AbstractEventLoop, sig: signal.Signals) -> bool:
    # Only the main thread may own signal handlers (CliRunner runs us there too).
    try:
        loop.add_signal_handler(sig, lambda: None)
    except (RuntimeError, ValueError, NotImplementedError):
        return False
    loop.remove_signal_handler(sig)
    return True


def leave_abandoned_threads(result: RunResult) -> None:
    """End the process now if the task's thread was abandoned (recorded ``lost``).

    A thread cannot be killed, and the interpreter would wait for it at exit,
    so a forced stop would hang the terminal for as long as the task keeps
    going. The store already holds the truth (``lost``, "it may still be
    running"); ending the process is the only way to really stop that thread.
    """
    import os
    import threading

    if result.snapshot.status.value != "lost":
        return
    main = threading.main_thread()
    lingering = [
        t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()
    ]
    if lingering:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(result.exit_code)


def result_text(snapshot: TaskSnapshot) -> str:
    """The one line ``run`` ends with: the outcome, then the result or the failure."""
    import json

    from chongming.render.text import escape_text

    elapsed = snapshot.elapsed(snapshot.finished_at or snapshot.updated_at)
    took = "" if elapsed is None else f" after {elapsed:.2f}s"
    head = f"{escape_text(snapshot.task_id)} {snapshot.status.value}{took}"
    if snapshot.failure is not None:
        return escape_text(f"{head}: {describe_failure(snapshot.failure)}")
    if snapshot.status.value == "succeeded":
        shown = json.dumps(snapshot.result, ensure_ascii=False)
        if len(shown) > _RESULT_CHARS:
            shown = shown[: _RESULT_CHARS - 3] + "..."
        return escape_text(f"{head}; result: {shown}")
    return head
