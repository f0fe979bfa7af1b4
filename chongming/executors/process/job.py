"""One call on one worker: the messages it gets, turned into what the context shows.

The parent's :class:`TaskContext` stays the one the runtime reads: a
heartbeat from the worker moves its heartbeat, progress and log records are
reported through it, a pause receipt reaches the run, and the end of the
call (a result, an exception known by name, a crash) settles the call's
future. Nothing a worker sends is unpickled or imported: an exception class
is looked up among the modules this process has already imported.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

from chongming.errors import CheckpointMisuse, PayloadError, TaskCancelled
from chongming.executors.base import CarrierFailure
from chongming.executors.process.protocol import describe_exit, encode
from chongming.executors.process.target import TargetName
from chongming.executors.process.worker_handle import WorkerHandle
from chongming.state.records import Failure, FailureKind
from chongming.task_api.context import TaskContext

__all__ = ["Job", "deliver_message", "worker_exited"]

_log = logging.getLogger("chongming.executors.process")
_TASK_LOGGER = logging.getLogger("chongming.task")  # the parent of every ctx.logger


class Job:
    """One call on one worker: the messages it gets, turned into what the context shows."""

    __slots__ = ("context", "future", "seq", "signals", "worker")

    def __init__(self, seq: int, context: TaskContext, worker: WorkerHandle) -> None:
        self.seq = seq
        self.context = context
        self.signals = context.carrier_signals
        self.worker = worker
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def run_frame(self, name: TargetName, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
        context = self.context
        signals = self.signals
        job = {
            "module": name.module,
            "qualname": name.qualname,
            "task_id": context.task_id,
            "name": context.name,
            "attempt": context.attempt,
            "artifact_root": os.fspath(context.artifact_root),
            "upstream": dict(context.upstream),
            "trace_id": context.trace_id,
            "args": list(args),
            "kwargs": kwargs,
            "stop": signals.stop_requested,
            "pause": signals.pause_requested,
            "generation": signals.pause_generation,
            # ctx.logger inherits its level: read it without building the logger.
            "log_level": _TASK_LOGGER.getEffectiveLevel(),
        }
        try:
            return encode(["run", self.seq, job])
        except (TypeError, ValueError) as error:  # arguments are JSON by now; never expected
            raise PayloadError("arguments", f"cannot be sent to a worker ({error})") from None

    def relay(self) -> None:
        signals = self.signals
        self.worker.send(
            [
                "control",
                self.seq,
                signals.stop_requested,
                signals.pause_requested,
                signals.pause_generation,
            ]
        )

    def handle(self, message: list[Any]) -> None:
        kind = message[0]
        if kind == "beat":
            self.signals.beat_aged(float(message[2]))
        elif kind == "progress":
            done, total, unit, text = message[2:6]
            try:
                self.context.progress(done, total=total, unit=unit, message=text)
            except PayloadError:
                _log.warning("a worker reported progress that is not valid: %r", message[2:6])
        elif kind == "log":
            _log_record(self.context, self.worker, message[2])
        elif kind == "paused":
            self.signals.report_pause_reached(int(message[2]))
        elif kind == "result":
            self._settle(None, message[2])
        elif kind == "error":
            self._settle(_child_error(message[2], self.worker.pid))
        elif kind == "invalid":
            failure = Failure(
                kind=FailureKind.RESULT_INVALID,
                message=str(message[3]),
                exception_type=str(message[2]),
                retryable=False,
            )
            self._settle(CarrierFailure(failure))
        elif kind == "launch_error":
            failure = Failure(kind=FailureKind.LAUNCH_ERROR, message=str(message[2]))
            self._settle(CarrierFailure(failure))

    def worker_exited(self) -> None:
        """The worker died before the job ended: the task crashed."""
        worker = self.worker
        text = (
            f"the worker process (pid {worker.pid}) "
            f"{describe_exit(worker.exitcode, killed_by_parent=worker.ended_by is not None)} "
            "while running the task, before it returned a result"
        )
        if worker.ended_by:
            text += f" ({worker.ended_by})"
        failure = Failure(kind=FailureKind.CRASHED, message=text, retryable=True)
        self._settle(CarrierFailure(failure))

    def _settle(self, error: BaseException | None, value: Any = None) -> None:
        future = self.future
        if future.done():
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)


def deliver_message(worker: WorkerHandle, message: list[Any]) -> None:
    job = worker.job
    if isinstance(job, Job) and len(message) >= 3 and message[1] == job.seq:
        job.handle(message)


def worker_exited(worker: WorkerHandle) -> None:
    job = worker.job
    if isinstance(job, Job):
        job.worker_exited()


def _child_error(info: Any, pid: int | None) -> BaseException:
    """The parent's view of an exception raised in a worker.

    Nothing is unpickled and nothing is imported: the class is looked up by
    name among the modules this process has already imported. The runtime's
    own stop and misuse errors are raised as they are (a stop is then
    ``stopped``); a ``BaseException`` that is no ``Exception`` (``SystemExit``)
    is a failure that is not retried, as it is in a thread; any other
    exception is a :class:`CarrierFailure` with the child's text and type
    name, carrying a rebuilt instance for retry policies when the class is
    known here.
    """
    info = info if isinstance(info, dict) else {}
    module = str(info.get("module", ""))
    qualname = str(info.get("qualname", "Exception"))
    message = str(info.get("message", ""))
    trace = str(info.get("traceback", ""))
    short_name = qualname.rpartition(".")[2]
    if info.get("base") is True:  # SystemExit, KeyboardInterrupt: as a thread's would be
        failure = Failure(
            kind=FailureKind.EXCEPTION,
            message=f"{short_name}: {message}" if message else short_name,
            exception_type=short_name,
            retryable=False,
        )
        return _with_trace(CarrierFailure(failure), trace, pid)
    kind = _known_class(module, qualname)
    if kind is not None and issubclass(kind, TaskCancelled | CheckpointMisuse):
        return kind(message)
    rebuilt: BaseException | None = None
    if kind is not None and issubclass(kind, Exception):
        try:
            rebuilt = kind.__new__(kind)
            rebuilt.args = (message,)
        except Exception:
            rebuilt = None
    failure = Failure(
        kind=FailureKind.EXCEPTION, message=message, exception_type=short_name, retryable=True
    )
    return _with_trace(CarrierFailure(failure, rebuilt), trace, pid)


def _with_trace(error: CarrierFailure, trace: str, pid: int | None) -> CarrierFailure:
    if trace:
        note = f"raised in worker process {pid}:\n{trace}"
        error.add_note(note)
        if error.error is not None:
            error.error.add_note(note)
    return error


def _known_class(module: str, qualname: str) -> type[BaseException] | None:
    if module == "__mp_main__":  # a worker imports the main script under this name
        module = "__main__"
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if found is None:
            return None
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, BaseException):
        return found
    return None


def _log_record(context: TaskContext, worker: WorkerHandle, fields: Any) -> None:
    """Hand a record the task logged in the worker to ``ctx.logger`` here."""
    if not isinstance(fields, dict):
        return
    logger = context.logger
    level = fields.get("level")
    if not isinstance(level, int) or not logger.isEnabledFor(level):
        return
    record = logging.LogRecord(
        name=str(fields.get("name") or logger.name),
        level=level,
        pathname=str(fields.get("pathname", "")),
        lineno=int(fields.get("lineno") or 0),
        msg=str(fields.get("message", "")),
        args=None,
        exc_info=None,
        func=str(fields.get("funcName", "")) or None,
    )
    created = fields.get("created")
    if isinstance(created, float):
        record.created = created
        record.msecs = (created - int(created)) * 1000
    exc_text = fields.get("exc_text")
    record.exc_text = exc_text if isinstance(exc_text, str) else None
    record.process = worker.pid
    record.processName = "chongming-worker"
    logger.handle(record)
