"""The control block shared by one attempt and the runtime driving it.

The runtime writes the request flags on the event-loop thread; the task reads
them at its checkpoints, on the loop (coroutines, inline) or from a worker
thread. Plain attribute reads and writes are atomic in CPython, so the flags
need no lock; waiting uses a ``threading.Event`` for threads and an
``asyncio.Event`` for coroutines.

Each pause request has a generation number and a gate of its own. A thread
parks on the gate of the generation it saw and its "pause reached" receipt
travels to the loop with that generation: a receipt that arrives after a
resume (and perhaps a new pause) is recognised as stale, and a thread that
reaches its gate only after the resume finds that gate already open — it can
never sit under a newer pause that it did not report.

Heartbeats are read on the loop's clock (``loop.time()``, see
:func:`loop_clock`), the clock every timer of the runtime uses.

The block is the base of :class:`~chongming.task_api.context.TaskContext`,
and the runtime's attempt (:class:`~chongming.run.attempt.Attempt`) is that
context: one object per attempt, which the function receives, whose flags
its threads read, and whose hooks (``_on_launch``, ``_on_pause_reached``)
the attempt overrides. A child process's context overrides the loop-bound
parts instead (:mod:`chongming.executors.process.child`).
"""

from __future__ import annotations

import asyncio
import enum
import threading
import time
import weakref
from collections.abc import Callable

__all__ = ["AttemptSignals", "CarrierKind", "loop_clock"]

_STOCK_TIME = asyncio.BaseEventLoop.time
#: The last loop asked about and its clock: one loop per thread is the rule.
_LAST_CLOCK: list[tuple[weakref.ref[asyncio.AbstractEventLoop], Callable[[], float]]] = []


def loop_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The clock ``loop`` runs its timers on, as cheap to read as it can be.

    A stock asyncio loop's ``time()`` is ``time.monotonic()`` behind a Python
    frame: the C function is returned instead (an attempt reads it several
    times). A loop that brings its own clock (uvloop, a virtual-time test
    loop) keeps it.
    """
    if _LAST_CLOCK:
        ref, clock = _LAST_CLOCK[0]
        if ref() is loop:
            return clock
    clock = time.monotonic if getattr(type(loop), "time", None) is _STOCK_TIME else loop.time
    _LAST_CLOCK[:] = [(weakref.ref(loop), clock)]
    return clock


class CarrierKind(enum.Enum):
    """What carries the attempt, which decides the checkpoint flavour."""

    COROUTINE = "coroutine"  # async def on the loop: ``await ctx.checkpoint()``
    THREAD = "thread"  # sync function in a worker thread: ``ctx.checkpoint()``
    INLINE = "inline"  # sync function on the loop thread: cannot block to pause
    PROCESS = "process"  # sync function in a child process


class AttemptSignals:
    """Requests from the runtime, heartbeats and pause receipts from the task.

    No constructor of its own: the context that it is the base of sets every
    field in its one ``__init__`` (:meth:`init_signals` says which).
    """

    __slots__ = (
        "_async_gate",
        "_loop",
        "_relay",
        "_thread_gate",
        "_time",
        "abandoned",
        "carrier",
        "carrier_end",
        "last_beat",
        "launched",
        "loop_thread",
        "pause_generation",
        "pause_requested",
        "stop_requested",
    )

    def init_signals(self, carrier: CarrierKind, loop: asyncio.AbstractEventLoop) -> None:
        """Every field of the block, for a run on ``loop`` (the runtime's attempt inlines it)."""
        self.carrier = carrier
        self.launched = False
        self.abandoned = False
        self.stop_requested = False
        self.pause_requested = False
        self.pause_generation = 0
        self._time = clock = loop_clock(loop)
        self.last_beat = clock()
        self._loop = loop
        self.loop_thread = threading.get_ident()
        # A gate per pause request (most attempts never pause): read as one
        # attribute, so a thread always gets a matching generation and gate.
        self._thread_gate: tuple[int, threading.Event] | None = None
        self._async_gate: tuple[int, asyncio.Event] | None = None
        # A carrier outside this process (a child) is told of every request.
        self._relay: Callable[[], None] = _nothing
        self.carrier_end: str | None = None  # "terminated" or "killed" by its executor

    # -- hooks the attempt overrides (loop thread) ------------------------------

    def _on_launch(self) -> None:
        """The carrier is about to call the function."""

    def _on_pause_reached(self, generation: int) -> None:
        """The function parked at a checkpoint for pause ``generation``."""

    # -- runtime side (event-loop thread) --------------------------------------

    def request_stop(self) -> None:
        self.stop_requested = True
        self._open_gate()
        self._relay()

    def request_pause(self) -> int:
        """Close the gate for a new pause; returns its generation."""
        self._open_gate()  # whoever still waits on an older gate goes on
        generation = self.pause_generation = self.pause_generation + 1
        if self.carrier is CarrierKind.THREAD:
            self._thread_gate = (generation, threading.Event())
        elif self.carrier is CarrierKind.COROUTINE:
            self._async_gate = (generation, asyncio.Event())
        self.pause_requested = True
        self._relay()
        return generation

    def withdraw_pause(self) -> None:
        """Resume, or roll back a pause that was not reached."""
        self.pause_requested = False
        self._open_gate()
        self._relay()

    def _open_gate(self) -> None:
        if self._thread_gate is not None:
            self._thread_gate[1].set()
        if self._async_gate is not None:
            self._async_gate[1].set()

    # -- carriers in another process (on the event-loop thread) ---------------

    def relay_requests(self, relay: Callable[[], None] | None) -> None:
        """Call ``relay()`` after every stop, pause or resume request (``None``: stop).

        A carrier that runs the function in a child process reads the flags
        in ``relay`` and sends them on; the callback must not raise.
        """
        self._relay = relay or _nothing

    def enter_from_loop(self) -> bool:
        """:meth:`enter` for a carrier driven from the loop thread (a child process).

        The attempt is told at once that it is running, without a trip
        through ``call_soon_threadsafe``. False: do not start the function.
        """
        self.last_beat = self._time()
        if not self.enter(from_thread=False):
            return False
        self._on_launch()
        return True

    def beat_aged(self, age: float) -> None:
        """A heartbeat relayed from elsewhere: the checkpoint was ``age`` seconds ago."""
        heartbeat = self._time() - max(0.0, age)
        if heartbeat > self.last_beat:
            self.last_beat = heartbeat

    def report_pause_reached(self, generation: int) -> None:
        """A relayed pause receipt: the function parked for pause ``generation``."""
        self._on_pause_reached(generation)

    def abandon(self) -> bool:
        """The runtime gives up on a carrier. True if the function ever started.

        Together with :meth:`enter` this is a two-flag handshake: each side
        writes its flag, then reads the other's, so at least one of them sees
        the other. Either the carrier sees ``abandoned`` and never calls the
        function, or the runtime sees ``launched`` and must say ``lost``.
        """
        self.abandoned = True
        return self.launched

    # -- task side -------------------------------------------------------------

    def enter(self, *, from_thread: bool) -> bool:
        """Called by a carrier right before the function. False: do not start it.

        A carrier on another thread also tells the loop that the attempt is
        now running; one on the loop thread reports that itself.
        """
        self.launched = True
        if self.abandoned or self.stop_requested:
            return False
        if not from_thread:
            return True
        try:
            self._loop.call_soon_threadsafe(self._on_launch)
        except RuntimeError:
            return False  # the loop is gone: nobody could record this attempt
        return True

    def beat(self) -> None:
        self.last_beat = self._time()

    def heartbeat_age(self) -> float:
        """Seconds since the last checkpoint, on the loop's clock (callable off the loop)."""
        return max(0.0, self._time() - self.last_beat)

    def hold_in_thread(self) -> None:
        """Block the worker thread while paused (called at a checkpoint)."""
        pause = self._thread_gate
        if pause is None:
            return
        generation, gate = pause
        if gate.is_set():
            return  # resumed (or stopped) before we got here
        try:
            self._loop.call_soon_threadsafe(self._on_pause_reached, generation)
        except RuntimeError:
            return  # the loop is closed: nobody will ever resume us
        gate.wait()

    async def hold_on_loop(self) -> None:
        """Suspend the coroutine while paused (called at a checkpoint)."""
        pause = self._async_gate
        if pause is None:
            return
        generation, gate = pause
        if gate.is_set():
            return
        self._on_pause_reached(generation)
        await gate.wait()


def _nothing() -> None:
    pass
