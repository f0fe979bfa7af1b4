"""One worker process as the parent sees it: its pipe, its exit, and how it is ended.

Nothing here blocks the event loop. The socket is non-blocking and watched
with ``loop.add_reader``; so is the process's exit: its pidfd (Linux), which
becomes readable when the process exits whoever else holds its descriptors,
and multiprocessing's sentinel, the end of a pipe the worker holds. The
sentinel alone is not enough: a child the task forked holds a copy of that
pipe, and the worker's death would not be seen while the child lives. The
calls into ``multiprocessing`` that may block or race run in a thread (see
:mod:`.calls`).

Ending a worker is the hard stop: ``SIGTERM`` to its process group, up to
``grace`` seconds for the worker to exit, then ``SIGKILL`` to the group,
whatever of it is left, so a descendant that ignores ``SIGTERM`` does not
outlive its worker. A worker that exits on its own (it crashed) takes its
group along too: what its task started would otherwise run on beside the
next attempt. The group is the worker's own session (``os.setsid`` in
the child); a descendant that starts a session of its own has left it and is
out of reach.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import signal
import socket
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import Any

from chongming.executors.process.calls import (
    PROCESS_CALLS,
    finish_despite_cancellation,
    forget_worker,
    reap_process,
    settle,
    signal_group,
    start_process,
)
from chongming.executors.process.protocol import (
    FrameReader,
    ProtocolError,
    describe_exit,
    encode,
)
from chongming.executors.process.worker import worker_main

__all__ = ["WorkerHandle", "WorkerStartFailed", "WorkerState"]

_log = logging.getLogger("chongming.executors.process")

#: Seconds a worker may take from start to "ready" (an interpreter and its imports).
START_WAIT = 60.0
#: After SIGKILL a process ends at once; this only bounds one stuck in the kernel.
KILL_WAIT = 5.0
#: A worker that closed its pipe but did not exit is killed after this long.
SILENT_EXIT_WAIT = 1.0
_READ_SIZE = 1 << 18


class WorkerState(enum.Enum):
    STARTING = "starting"
    READY = "ready"  # idle, or running a job
    RETIRED = "retired"  # being ended; takes no more jobs
    EXITED = "exited"


class WorkerStartFailed(Exception):
    """A worker process could not be started, or exited before it was ready."""


class WorkerHandle:
    """A worker process: start it, send to it, hear from it, end it.

    ``on_message(worker, message)`` receives every message but ``ready``;
    ``on_exit(worker)`` is called once, after the process exited and was
    reaped. The worker's last messages are read before that, so a result it
    sent just before it died is not lost.
    """

    def __init__(
        self,
        context: BaseContext,
        on_message: Callable[[WorkerHandle, list[Any]], None],
        on_exit: Callable[[WorkerHandle], None],
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._on_message = on_message
        self._on_exit = on_exit
        self._sock, self._child_sock = socket.socketpair()
        self.process = context.Process(  # type: ignore[attr-defined]
            target=worker_main, args=(self._child_sock,), name="chongming-worker", daemon=False
        )
        self.state = WorkerState.STARTING
        self.pid: int | None = None
        self.exitcode: int | None = None
        self.ended_by: str | None = None  # why the parent ended it, if it did
        self.served = False  # it became ready (it did not die while starting)
        self.job: object = None  # what the executor runs on it now
        self._reader = FrameReader()
        self._outgoing = bytearray()
        self._reading = False
        self._writing = False
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self.exited: asyncio.Future[None] = self._loop.create_future()
        self._silence_timer: asyncio.TimerHandle | None = None
        self._exit_watches: list[int] = []  # descriptors readable once the process exited

    def __repr__(self) -> str:
        return f"<worker pid={self.pid} {self.state.value}>"

    @property
    def usable(self) -> bool:
        return self.state is WorkerState.READY

    # -- start -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the process and wait until it says it is ready.

        Raises :class:`WorkerStartFailed`. Cancellation: the start (in a
        thread) is waited for, a started process is ended, and the
        cancellation is re-raised: nothing is left behind.
        """
        started = self._loop.run_in_executor(None, start_process, self.process)
        try:
            await asyncio.shield(started)
        except asyncio.CancelledError:
            await settle(started)
            if started.cancelled() or started.exception() is not None:
                self._abandon()
            else:
                self._watch()
                await settle(asyncio.ensure_future(self.end(0.0)))
            raise
        except Exception as error:
            self._abandon()
            raise WorkerStartFailed(f"the worker process could not be started: {error}") from error
        finally:
            if started.done():
                self._child_sock.close()  # the child holds its own copy now
        self._watch()
        try:
            await asyncio.wait([self._ready], timeout=START_WAIT)
        except asyncio.CancelledError:
            await settle(asyncio.ensure_future(self.end(0.0)))
            raise
        if not self._ready.done():
            await finish_despite_cancellation(self.end(0.0))
            raise WorkerStartFailed(f"the worker process was not ready within {START_WAIT:g} s")
        failed = self._ready.exception()
        if failed is not None:
            raise failed

    def _watch(self) -> None:
        self.pid = self.process.pid  # remembered for the exit hook by start_process
        self._sock.setblocking(False)
        self._loop.add_reader(self._sock.fileno(), self._readable)
        self._reading = True
        self._exit_watches = [self.process.sentinel]
        pidfd = _open_pidfd(self.pid)
        if pidfd is not None:
            self._exit_watches.append(pidfd)
        for descriptor in self._exit_watches:
            self._loop.add_reader(descriptor, self._sentinel_readable)

    def _abandon(self) -> None:
        """The process never started: release what was made for it."""
        self.state = WorkerState.EXITED
        self._sock.close()
        self._child_sock.close()
        if not self.exited.done():
            self.exited.set_result(None)

    # -- messages ----------------------------------------------------------------

    def send(self, message: list[Any]) -> None:
        """Queue ``message`` for the worker; never blocks, never raises."""
        try:
            frame = encode(message)
        except (TypeError, ValueError):
            _log.exception("a message for worker %s is not JSON", self.pid)
            return
        self.send_frame(frame)

    def send_frame(self, frame: bytes) -> None:
        """Queue an encoded message; what the socket does not take now is sent when it can."""
        if self.state is WorkerState.EXITED or self.pid is None:
            return
        if self._outgoing:
            self._outgoing += frame
            return
        try:
            sent = self._sock.send(frame)
        except BlockingIOError:
            sent = 0
        except OSError:
            return  # the worker is gone; its exit is on its way
        if sent < len(frame):
            self._outgoing += frame[sent:]
            self._loop.add_writer(self._sock.fileno(), self._writable)
            self._writing = True

    def _writable(self) -> None:
        try:
            sent = self._sock.send(self._outgoing)
        except BlockingIOError:
            return
        except OSError:
            sent = len(self._outgoing)
        del self._outgoing[:sent]
        if not self._outgoing:
            self._stop_writing()

    def _readable(self) -> None:
        try:
            data = self._sock.recv(_READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._pipe_closed()
            return
        self._deliver(data)

    def _deliver(self, data: bytes) -> None:
        try:
            messages = self._reader.feed(data)
        except (ProtocolError, RecursionError) as error:
            _log.error("worker %s sent a broken stream (%s); killing it", self.pid, error)
            self.ended_by = "it sent a broken message stream and was killed"
            self._pipe_closed()
            self.signal_group(signal.SIGKILL)
            return
        for message in messages:
            kind = message[0]
            if kind == "ready":
                self.served = True
                if self.state is WorkerState.STARTING:
                    self.state = WorkerState.READY
                if not self._ready.done():
                    self._ready.set_result(None)
                continue
            try:
                self._on_message(self, message)
            except Exception:
                _log.exception("handling a %r message of worker %s failed", kind, self.pid)

    def _pipe_closed(self) -> None:
        """No more messages. A worker that closed its pipe but lives on is killed soon."""
        self._stop_reading()
        if self.state is not WorkerState.EXITED and self._silence_timer is None:
            self._silence_timer = self._loop.call_later(SILENT_EXIT_WAIT, self._silent)

    def _silent(self) -> None:
        self._silence_timer = None
        if not self.exited.done():
            self.ended_by = self.ended_by or "it closed its pipe to the parent and was killed"
            self.signal_group(signal.SIGKILL)

    # -- exit --------------------------------------------------------------------

    def _sentinel_readable(self) -> None:
        """The worker exited. What its task left in its process group goes with it.

        Sent before the worker is reaped, while its pid (the group's id) is
        still taken, so no other process can hold that id yet.
        """
        if self._stop_watching_exit():
            return  # the other watch fired first
        self.signal_group(signal.SIGKILL)
        while self._reading:  # what it sent before it exited is still in the socket
            try:
                data = self._sock.recv(_READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                break
            self._deliver(data)
        self._stop_reading()
        reaped = self._loop.run_in_executor(None, reap_process, self.process)
        reaped.add_done_callback(self._reaped)

    def _reaped(self, reaped: asyncio.Future[int | None]) -> None:
        self.exitcode = None if reaped.cancelled() or reaped.exception() else reaped.result()
        if self._silence_timer is not None:
            self._silence_timer.cancel()
            self._silence_timer = None
        self._stop_writing()
        self._sock.close()
        if self.pid is not None:
            forget_worker(self.pid)
        self.state = WorkerState.EXITED
        if not self._ready.done():
            text = f"the worker process (pid {self.pid}) {describe_exit(self.exitcode)}"
            self._ready.set_exception(WorkerStartFailed(text + " before it was ready"))
            self._ready.exception()  # retrieved: start() reads it again, or nobody waits
        self.exited.set_result(None)
        try:
            self._on_exit(self)
        except Exception:
            _log.exception("handling the exit of worker %s failed", self.pid)

    def _stop_watching_exit(self) -> bool:
        """Stop watching for the exit; ``True`` if that had been done already."""
        watches, self._exit_watches = self._exit_watches, []
        for descriptor in watches:
            self._loop.remove_reader(descriptor)
        for descriptor in watches[1:]:  # the pidfd; the sentinel is multiprocessing's
            os.close(descriptor)
        return not watches

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._sock.fileno())

    def _stop_writing(self) -> None:
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._sock.fileno())
        self._outgoing.clear()

    # -- ending ------------------------------------------------------------------

    def signal_group(self, number: int) -> None:
        """Send ``number`` to the worker's process group (or to the worker, before its setsid)."""
        signal_group(self.pid, number, alive=not self.exited.done())

    async def end(self, grace: float, why: str = "the executor ended it") -> str:
        """The hard stop: ``"terminated"`` (exited on SIGTERM within ``grace``) or ``"killed"``.

        Returns once the worker exited and was reaped, and its process group
        was sent SIGKILL. Bounded: ``grace`` plus at most :data:`KILL_WAIT`.
        Cancellation: run it under :func:`finish_despite_cancellation`; the
        sequence must reach its end.
        """
        if self.pid is None:
            return "terminated"  # not started yet: its start ends it (see start())
        if self.state is not WorkerState.EXITED:
            self.state = WorkerState.RETIRED
            self.ended_by = self.ended_by or why
        how = "terminated"
        if not self.exited.done():
            self.signal_group(signal.SIGTERM)
            if grace > 0:
                await asyncio.wait([self.exited], timeout=grace)
            if not self.exited.done():
                how = "killed"
        self.signal_group(signal.SIGKILL)  # whatever of the group is left goes now
        if not self.exited.done():
            await asyncio.wait([self.exited], timeout=KILL_WAIT)
            if not self.exited.done():
                _log.error("worker %s did not exit %.0f s after SIGKILL", self.pid, KILL_WAIT)
        return how

    async def close(self, timeout: float) -> None:
        """Ask an idle worker to exit; end it the hard way after ``timeout``."""
        if self.state is WorkerState.EXITED or self.pid is None:
            return
        self.state = WorkerState.RETIRED
        self.send(["close"])
        await asyncio.wait([self.exited], timeout=timeout)
        await self.end(0.0, "its executor was closed")  # and anything it left in its group

    def discard(self) -> None:
        """Its event loop is closed: kill the group and release everything without it."""
        self.state = WorkerState.EXITED
        for descriptor in self._exit_watches[1:]:  # its loop is gone: nothing to remove
            os.close(descriptor)
        self._exit_watches = []
        self.signal_group(signal.SIGKILL)
        self._sock.close()
        self._child_sock.close()
        if self.pid is not None:
            forget_worker(self.pid)
            with PROCESS_CALLS:
                self.process.join(KILL_WAIT)  # SIGKILLed: this returns at once
                if self.process.exitcode is not None:
                    self.process.close()


def _open_pidfd(pid: int | None) -> int | None:
    """A descriptor readable once ``pid`` exits (Linux 5.3+), or ``None`` where there is none."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pid is None or pidfd_open is None:
        return None
    try:
        descriptor: int = pidfd_open(pid)
    except OSError:  # too old a kernel, or it has exited already: the sentinel says so
        return None
    return descriptor  # close-on-exec, as pidfd_open makes it
