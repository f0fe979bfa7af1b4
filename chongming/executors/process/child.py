"""The child's end of a worker's pipe, and the control block its task's context reads.

A worker runs the task function on its main thread and has no thread
listening to the parent: control messages are read where they matter, at
checkpoints. ``ctx.checkpoint()`` looks at the pipe (a non-blocking
``poll(0)``, at most every :data:`POLL_EVERY` seconds), so a stop reaches a
checkpointing task in well under a millisecond, and a pause parks the task
right there, blocked on the pipe until the resume or the stop arrives.

Heartbeats and progress go the other way, coalesced: at most one message of
each every :data:`SEND_EVERY` seconds, and a small flusher thread sends what
is still pending when the task goes quiet, so the parent is never more than
that much behind (the idle timeout is measured to within it).

Only the worker speaks on its pipe. A process a task forks inherits the
link; from the fork on, the link is mute in it (closed, as if the parent
were gone, but without asking the task to stop): it reads nothing, so it
cannot take the worker's messages, and sends nothing, so nothing it says
is taken for the worker's. ``os.register_at_fork`` makes a forked copy mute
at once (with fresh locks, in case another thread held one as it forked);
every read, write and lock also checks the pid, for a fork made below
Python.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chongming.executors.process.protocol import FrameReader, ProtocolError, encode
from chongming.state.records import JsonValue, Progress
from chongming.task_api.context import TaskContext
from chongming.task_api.signals import CarrierKind

__all__ = ["POLL_EVERY", "SEND_EVERY", "ChildContext", "ChildLink"]

#: Seconds between two looks at the control pipe from checkpoints.
POLL_EVERY = 0.0005
#: Heartbeats and progress reach the parent at most this many seconds late.
SEND_EVERY = 0.01
_WAIT_MS = 50  # a paused task looks at its pipe at least this often

_monotonic = time.monotonic
_NO_UPSTREAM: Mapping[str, JsonValue] = MappingProxyType({})


class ChildContext(TaskContext):
    """The context of a task running in a worker, and its control block; fed by :class:`ChildLink`.

    A :class:`TaskContext` whose loop-bound parts are replaced, so the child
    runs the very same context code as the parent: a sync task uses the
    thread flavour of ``checkpoint()`` (a pause blocks it), a coroutine the
    awaited one. The base constructor wants the parent's event loop; a worker
    has none, so the fields are set here.
    """

    __slots__ = ("_link", "_stop", "changed")

    def __init__(
        self,
        link: ChildLink,
        carrier: CarrierKind,
        *,
        task_id: str,
        name: str,
        attempt: int,
        artifact_root: Path,
        upstream: Mapping[str, JsonValue] | None,
        trace_id: str | None = None,
    ) -> None:
        self._link = link
        self.carrier = carrier
        self.launched = True
        self.abandoned = False
        self._stop = False
        self.pause_requested = False
        self.pause_generation = 0
        self._time = _monotonic
        self.last_beat = _monotonic()
        self.loop_thread = -1  # no thread of a worker is the parent's loop thread
        self._thread_gate = None
        self._async_gate = None
        self._relay = _nothing
        self.carrier_end = None
        self.changed: asyncio.Event | None = None  # set on every control message (coroutines)
        self.task_id = task_id
        self.name = name
        self.attempt = attempt
        self.upstream = upstream or _NO_UPSTREAM
        self._artifact_root = artifact_root
        self._artifact_dir = None
        self._on_progress = link.progress
        self._logger = None
        self._unawaited = None
        self.journal = None
        self.trace_id = trace_id

    @property
    def stop_requested(self) -> bool:
        """Fresh even without a checkpoint: ``ctx.is_stop_requested`` looks at the pipe."""
        if not self._stop:
            self._link.poll_if_due(_monotonic())
        return self._stop

    @stop_requested.setter
    def stop_requested(self, value: bool) -> None:
        self._stop = value

    def apply(self, stop: bool, pause: bool, generation: int) -> None:
        """The parent's latest requests (each control message carries all of them)."""
        self._stop = self._stop or stop
        self.pause_requested = pause
        self.pause_generation = generation
        if self.changed is not None:
            self.changed.set()

    def beat(self) -> None:
        now = _monotonic()
        self.last_beat = now
        self._link.checkpoint(now)

    def heartbeat_age(self) -> float:
        return max(0.0, _monotonic() - self.last_beat)

    def enter(self, *, from_thread: bool) -> bool:
        return not self._stop

    def hold_in_thread(self) -> None:
        link = self._link
        generation = self.pause_generation
        link.report_paused(generation)
        while self._holds(generation):
            link.wait()

    async def hold_on_loop(self) -> None:
        generation = self.pause_generation
        self._link.report_paused(generation)
        changed = self.changed
        while changed is not None and self._holds(generation):
            await changed.wait()
            changed.clear()

    def _holds(self, generation: int) -> bool:
        return (
            self.pause_requested
            and self.pause_generation == generation
            and not self._stop
            and not self._link.closed
        )


class ChildLink:
    """The worker's socket: whole messages in, coalesced reports out, thread-safe."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self.pid = os.getpid()  # the worker: the only process that speaks on this link
        self._sock = sock
        self.fileno = sock.fileno()
        self._poller = select.poll()
        self._poller.register(self.fileno, select.POLLIN)
        self._reader = FrameReader()
        self._inbox: deque[list[Any]] = deque()  # messages for the main loop
        self._receiving = threading.Lock()
        self._sending = threading.Lock()
        self.closed = False  # the parent is gone (or the stream broke)
        self.seq: int | None = None  # the job running now
        self._signals: ChildContext | None = None
        self._progress: Progress | None = None
        self._beat_sent = 0.0
        self._next_send = 0.0
        self._next_poll = 0.0
        self._armed = False
        self._due = threading.Event()
        self._flusher: threading.Thread | None = None
        self._early: list[Any] | None = None  # the last control message of no running job
        self._closing = False
        self._disowned = False  # this is a process forked from the worker (see disown)

    # -- receiving ---------------------------------------------------------------

    def next_message(self) -> list[Any] | None:
        """The next message for the main loop, waiting for it; ``None`` once the parent is gone."""
        while not self._inbox:
            if self.closed or not self._read(block=True):
                return None
        return self._inbox.popleft()

    def poll(self) -> None:
        """Apply every control message that has arrived, without blocking."""
        while not self.closed and self._read(block=False):
            pass

    def poll_if_due(self, now: float) -> None:
        if now >= self._next_poll:
            self._next_poll = now + POLL_EVERY
            self.poll()

    def wait(self) -> None:
        """Wait (a little) for a message and apply what came: a paused task's loop.

        Bounded, so a second thread parked at a checkpoint of the same task
        sees a resume that the first one read.
        """
        if self.foreign():
            return
        with self._receiving:
            if self.closed or not self._poller.poll(_WAIT_MS):
                return
        self.poll()

    def _read(self, *, block: bool) -> bool:
        """Read what is there (or wait for something: ``block``); False when nothing came."""
        if self.foreign():
            return False
        with self._receiving:
            if self.closed:
                return False
            if not block and not self._poller.poll(0):
                return False
            try:
                data = self._sock.recv(1 << 16)
                messages = self._reader.feed(data) if data else None
            except (OSError, ProtocolError):
                messages = None
            if messages is None:
                self._parent_gone()
                return False
            for message in messages:
                self._take(message)
            return True

    def _take(self, message: list[Any]) -> None:
        if message[0] != "control":
            self._inbox.append(message)
            return
        if len(message) != 5:
            return
        signals = self._signals
        if signals is not None and message[1] == self.seq:
            signals.apply(bool(message[2]), bool(message[3]), int(message[4]))
        else:
            # For a job that ended (stale), or one whose run message was read
            # with it and has not begun yet: ``begin`` applies the latter.
            self._early = message

    def foreign(self) -> bool:
        """This is not the worker but a process forked from it: the link is mute here.

        Checked before every read, write and lock, so that a fork below
        Python (no fork hook ran) never touches the pipe nor waits for a
        lock that another thread held as it forked.
        """
        if os.getpid() == self.pid:
            return False
        self.disown()
        return True

    def disown(self) -> None:
        """In a process forked from the worker: never read or write the pipe again.

        Not a stop: a forked child that uses the context goes on as if its
        reports reached nobody. Idempotent.
        """
        if os.getpid() == self.pid or self._disowned:
            return
        self._disowned = True
        self.closed = True
        self._closing = True
        self._flusher = None
        self._receiving = threading.Lock()
        self._sending = threading.Lock()

    def _parent_gone(self) -> None:
        """Nobody is left to report to: the running task is asked to stop.

        This may run on the flusher thread, so it only sets flags; a paused
        coroutine is woken by the loop's reader (see ``process.worker``).
        """
        self.closed = True
        signals = self._signals
        if signals is not None:
            signals.stop_requested = True

    # -- sending -----------------------------------------------------------------

    def send(self, message: list[Any]) -> None:
        if self.foreign():
            return
        frame = encode(message)
        with self._sending:
            self._write(frame)

    def begin(self, seq: int, signals: ChildContext) -> None:
        now = _monotonic()
        with self._sending:
            self.seq = seq
            self._signals = signals
            self._progress = None
            self._beat_sent = signals.last_beat
            self._next_send = now + SEND_EVERY
            self._next_poll = now
            early, self._early = self._early, None
        if early is not None and early[1] == seq:
            signals.apply(bool(early[2]), bool(early[3]), int(early[4]))

    def finish(self, frame: bytes) -> None:
        """End the job: pending progress first (it happened before), then ``frame``."""
        if self.foreign():
            return
        with self._sending:
            frames = self._pending(_monotonic(), beat=False)
            self.seq = None
            self._signals = None
            self._progress = None
            self._write(b"".join([*frames, frame]))

    def checkpoint(self, now: float) -> None:
        """A checkpoint was passed: look at the pipe and report the heartbeat (both bounded)."""
        if now >= self._next_poll:
            self._next_poll = now + POLL_EVERY
            self.poll()
        if now >= self._next_send:
            self.flush(now)
        elif not self._armed:
            self._arm()

    def progress(self, progress: Progress) -> None:
        """``ctx.progress`` in the worker (its ``on_progress``): the latest one is sent."""
        if self.foreign():
            return
        now = _monotonic()
        with self._sending:
            self._progress = progress
            if now >= self._next_send:
                self._flush(now)
                return
        if not self._armed:
            self._arm()

    def report_paused(self, generation: int) -> None:
        if self.foreign():
            return
        with self._sending:
            frames = self._pending(_monotonic(), beat=True)
            if self.seq is not None:
                frames.append(encode(["paused", self.seq, generation]))
            self._write(b"".join(frames))

    def flush(self, now: float) -> None:
        if self.foreign():
            return
        with self._sending:
            self._flush(now)

    def _flush(self, now: float) -> None:
        self._next_send = now + SEND_EVERY
        frames = self._pending(now, beat=True)
        if frames:
            self._write(b"".join(frames))

    def _pending(self, now: float, *, beat: bool) -> list[bytes]:
        seq = self.seq
        signals = self._signals
        if seq is None or signals is None:
            return []
        frames: list[bytes] = []
        progress = self._progress
        if progress is not None:
            self._progress = None
            frames.append(
                encode(
                    [
                        "progress",
                        seq,
                        progress.done,
                        progress.total,
                        progress.unit,
                        progress.message,
                    ]
                )
            )
        heartbeat = signals.last_beat
        if beat and heartbeat > self._beat_sent:
            self._beat_sent = heartbeat
            frames.append(encode(["beat", seq, max(0.0, now - heartbeat)]))
        return frames

    def _write(self, data: bytes) -> None:
        if not data or self.closed or self.foreign():
            return
        try:
            self._sock.sendall(data)
        except OSError:
            self._parent_gone()

    # -- the flusher thread ------------------------------------------------------

    def _arm(self) -> None:
        self._armed = True
        if self._flusher is None and not self._closing:
            self._flusher = threading.Thread(
                target=self._flush_when_due, name="chongming-worker-flusher", daemon=True
            )
            self._flusher.start()
        self._due.set()

    def close(self) -> None:
        """Stop the flusher thread (the worker is done with this link)."""
        if self.foreign():
            return
        flusher, self._flusher = self._flusher, None
        self._closing = True
        self._due.set()
        if flusher is not None:
            flusher.join(1.0)

    def _flush_when_due(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            if self._closing:
                return
            delay = self._next_send - _monotonic()
            if delay > 0:
                time.sleep(delay)
            self._armed = False
            self.flush(_monotonic())


def _nothing() -> None:
    pass
