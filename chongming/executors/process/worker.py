"""The main loop of a :class:`ProcessExecutor` worker process (this runs in the child).

A worker starts a session of its own (``os.setsid``), so its pid is also the
id of a process group that holds everything the task starts: the parent
ends the whole group with one ``killpg``. It then waits for jobs, one at a
time, until the parent closes the pipe or sends ``close``.

A job names its function (``module``, ``qualname``) and carries JSON
arguments; nothing the worker receives is unpickled. The worker imports the
function, builds a :class:`TaskContext` over a :class:`ChildContext`, calls
it (a coroutine function on a fresh event loop) and sends back the result,
the exception, or why the result cannot be stored. A task that raises
``SystemExit``, ``KeyboardInterrupt`` or another ``BaseException`` fails
like one that raised an exception (the parent records it as not retryable,
as the thread executor does), and the worker waits for its next job.

A task may fork. A forked child that leaves the task function (returns,
raises, ``sys.exit``) instead of calling ``os._exit`` arrives back here:
it exits at once with the status that ending would give a process (0, 1,
or the ``SystemExit`` code) and says nothing; the link is mute in it (see
:mod:`.child`), so only the worker ever speaks to the parent.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from chongming.errors import PayloadError
from chongming.executors.process.child import ChildContext, ChildLink
from chongming.executors.process.protocol import encode
from chongming.executors.process.target import TargetName, resolve_target
from chongming.state.payload import json_form
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import CarrierKind

__all__ = ["describe_exception", "worker_main"]

_MESSAGE_LIMIT = 2000
_TRACEBACK_LIMIT = 20_000


def worker_main(sock: socket.socket) -> None:
    """The target of every worker process."""
    os.setsid()
    _seal_descriptors()
    link = ChildLink(sock)
    os.register_at_fork(after_in_child=link.disown)
    logger = logging.getLogger("chongming.task")
    logger.handlers = [_ForwardRecords(link)]
    logger.propagate = False
    link.send(["ready", os.getpid()])
    try:
        while True:
            message = link.next_message()
            if message is None or message[0] == "close":
                return
            if message[0] == "run" and len(message) == 3:
                logger.setLevel(int(message[2].get("log_level", logging.INFO)))
                _run_job(link, int(message[1]), message[2])
    finally:
        link.close()


def _run_job(link: ChildLink, seq: int, job: dict[str, Any]) -> None:
    name = TargetName(str(job["module"]), str(job["qualname"]))
    try:
        fn, is_async = resolve_target(name)
    except Exception as error:
        text = f"the worker could not import {name.module}.{name.qualname}: {_describe(error)}"
        link.send(["launch_error", seq, text])
        return
    signals = context = ChildContext(
        link,
        CarrierKind.COROUTINE if is_async else CarrierKind.THREAD,
        task_id=str(job["task_id"]),
        name=str(job["name"]),
        attempt=int(job["attempt"]),
        artifact_root=Path(job["artifact_root"]),
        upstream=job["upstream"],
        trace_id=job.get("trace_id"),
    )
    signals.apply(bool(job["stop"]), bool(job["pause"]), int(job["generation"]))
    args, kwargs = tuple(job["args"]), dict(job["kwargs"])
    link.begin(seq, signals)
    try:
        if is_async:
            value = _run_coroutine(fn, context, args, kwargs, link, signals)
        else:
            value = fn(context, *args, **kwargs)
    except BaseException as error:  # SystemExit, KeyboardInterrupt too: they fail the attempt
        if link.foreign():
            _exit_forked(error)
        link.finish(encode(["error", seq, describe_exception(error)]))
        return
    if link.foreign():
        _exit_forked(None)
    if context.has_unawaited_checkpoint:
        link.finish(encode(["error", seq, describe_exception(context.misuse_error())]))
        return
    link.finish(_result_frame(seq, value))


def _run_coroutine(
    fn: Callable[..., Any],
    context: TaskContext,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    link: ChildLink,
    signals: ChildContext,
) -> Any:
    """Await ``fn`` on a fresh event loop that also watches the parent's pipe.

    A child the coroutine forked exits as soon as it leaves ``fn``: its copy
    of the loop shares the worker's epoll instance, and tearing that copy
    down (removing readers, closing the self-pipe) would unregister the
    worker's own descriptors.
    """

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        changed = signals.changed = asyncio.Event()

        def readable() -> None:
            link.poll()
            if link.closed:
                loop.remove_reader(link.fileno)
                changed.set()  # a paused task must see that the parent is gone

        loop.add_reader(link.fileno, readable)
        try:
            value = await fn(context, *args, **kwargs)
        except BaseException as error:
            if link.foreign():
                _exit_forked(error)
            raise
        finally:
            if not link.foreign():
                loop.remove_reader(link.fileno)
        if link.foreign():
            _exit_forked(None)
        return value

    return asyncio.run(main())


def _result_frame(seq: int, value: Any) -> bytes:
    if inspect.iscoroutine(value):
        value.close()  # never awaited: close it so Python does not warn
        reason = "the task returned a coroutine; declare the task function `async def`"
        return encode(["invalid", seq, "coroutine", reason])
    try:
        return encode(["result", seq, value])
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        json_form(value, "result", None)  # the check a run makes in-process, for its words
        reason = "result: not JSON-serialisable"
    except PayloadError as error:
        reason = str(error)
    reason += "; return JSON data (store large data elsewhere and return a pointer)"
    return encode(["invalid", seq, _text(type(value).__name__), reason])


def describe_exception(error: BaseException) -> dict[str, Any]:
    """What the parent learns of an exception: its class by name, its text, the traceback.

    ``base`` says it is no ``Exception`` (``SystemExit``, ``KeyboardInterrupt``):
    the parent cannot tell by the name of a class it may not know.
    """
    kind = type(error)
    return {
        "module": kind.__module__,
        "qualname": kind.__qualname__,
        "message": _text(_message(error)),
        "traceback": _text("".join(traceback.format_exception(error))[-_TRACEBACK_LIMIT:]),
        "base": not isinstance(error, Exception),
    }


def _message(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception as broken:
        text = f"<{type(error).__name__}: str() raised {type(broken).__name__}>"
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {_message(error)}"


def _text(text: str) -> str:
    """Text that JSON can carry whatever it holds (lone surrogates are escaped)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _exit_code(error: BaseException) -> int:
    if isinstance(error, SystemExit):
        code = error.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return 1


def _exit_forked(error: BaseException | None) -> NoReturn:
    """A process a task forked left the task function: end it as that would end a process.

    It never returns to the worker's loop, and never speaks on the link.
    """
    code = 0
    if error is not None:
        code = _exit_code(error)
        if not isinstance(error, SystemExit | KeyboardInterrupt):
            try:
                traceback.print_exception(error)
            except Exception:
                pass
    _exit(code)


def _exit(code: int) -> NoReturn:
    """End this process now (buffered output is written first)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _seal_descriptors() -> None:
    """Keep the worker's pipes out of the processes a task starts.

    multiprocessing hands the worker its socket and the pipe whose closing
    tells the parent it exited as inheritable descriptors; a task that runs
    ``os.system("cmd &")`` would pass them on, and the parent would not see
    the worker end while that command lives.
    """
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        try:
            descriptors = [int(name) for name in os.listdir("/dev/fd")]
        except OSError:
            descriptors = list(range(3, 256))
    for descriptor in descriptors:
        if descriptor > 2:
            try:
                os.set_inheritable(descriptor, False)
            except OSError:
                pass


class _ForwardRecords(logging.Handler):
    """Sends the records of ``ctx.logger`` (``chongming.task.*``) to the parent's context."""

    def __init__(self, link: ChildLink) -> None:
        super().__init__()
        self._link = link

    def emit(self, record: logging.LogRecord) -> None:
        seq = self._link.seq
        if seq is None:
            return
        try:
            message = record.getMessage()
        except Exception:
            message = f"{record.msg!r} (its arguments did not format)"
        exc_text = record.exc_text
        if record.exc_info and record.exc_info[1] is not None:
            exc_text = "".join(traceback.format_exception(record.exc_info[1]))
        fields = {
            "name": record.name,
            "level": record.levelno,
            "message": _text(message),
            "created": record.created,
            "pathname": _text(record.pathname),
            "lineno": record.lineno,
            "funcName": _text(record.funcName or ""),
            "exc_text": None if exc_text is None else _text(exc_text[-_TRACEBACK_LIMIT:]),
        }
        try:
            self._link.send(["log", seq, fields])
        except Exception:
            self.handleError(record)
