"""``TaskContext``: the one door between a running task and the runtime.

It is also the attempt's control block (:class:`AttemptSignals`, its base):
the flags its checkpoints read live on it. The runtime's attempt is a
subclass (:class:`~chongming.run.attempt.Attempt`), so one object per attempt
is the context, the control block and the driver. What each durable call
(``ctx.step``, ``ctx.sleep``, ``ctx.spawn`` …) checks before its journal sees
it is in :mod:`chongming.task_api.durable_calls`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
import threading
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chongming.errors import CheckpointMisuse, PayloadError, TaskCancelled
from chongming.logs.records import TASK_LOG_REDACTION
from chongming.state.payload import check_json_value
from chongming.state.records import JsonValue, Progress
from chongming.task_api import durable_calls
from chongming.task_api.journal import ChildEnd, ChildHandle, StepJournal
from chongming.task_api.signals import AttemptSignals, CarrierKind

__all__ = ["Checkpoint", "TaskContext"]

_TASK_LOGGER = logging.getLogger("chongming.task")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_NO_UPSTREAM: Mapping[str, JsonValue] = MappingProxyType({})


class Checkpoint:
    """What ``ctx.checkpoint()`` returns.

    In a coroutine task it must be awaited; everywhere else the checkpoint has
    already happened and awaiting the result is a mistake that gets a clear
    error instead of a confusing one.
    """

    __slots__ = ("_context", "_done")

    def __init__(self, context: TaskContext | None) -> None:
        self._context = context
        self._done = context is None

    def __await__(self) -> Generator[Any, None, None]:
        context = self._context
        if context is None:
            raise CheckpointMisuse(
                "this task runs synchronously (in a worker thread or inline); "
                "call ctx.checkpoint() without await"
            )
        self._done = True
        context._unawaited = None
        return context._checkpoint_on_loop().__await__()


_COMPLETED = Checkpoint(None)


class TaskContext(AttemptSignals):
    """Passed as the first argument to every task function.

    Call ``ctx.checkpoint()`` often: it is where stop and pause take effect
    and it refreshes the heartbeat that the idle timeout watches. In an
    ``async def`` task write ``await ctx.checkpoint()``; in a sync task just
    ``ctx.checkpoint()``.
    """

    __slots__ = (
        "_artifact_dir",
        "_artifact_root",
        "_logger",
        "_on_progress",
        "_unawaited",
        "attempt",
        "journal",
        "name",
        "task_id",
        "trace_id",
        "upstream",
    )

    def __init__(
        self,
        *,
        task_id: str,
        name: str,
        attempt: int,
        carrier: CarrierKind,
        loop: asyncio.AbstractEventLoop,
        artifact_root: Path,
        on_progress: Callable[[Progress], None],
        upstream: Mapping[str, JsonValue] | None = None,
    ) -> None:
        self.init_signals(carrier, loop)
        self.task_id = task_id
        self.name = name
        self.attempt = attempt
        self.upstream: Mapping[str, JsonValue] = upstream or _NO_UPSTREAM
        self._artifact_root = artifact_root
        self._artifact_dir: Path | None = None
        self._on_progress = on_progress
        self._logger: logging.Logger | None = None
        self._unawaited: Checkpoint | None = None
        #: A durable task's memoised steps (``None``: not durable).
        self.journal: StepJournal | None = None
        #: The OpenTelemetry trace id of this attempt (32 hex digits) where it is
        #: traced (``ChongmingTracing`` with an SDK), for logs that name it; else None.
        self.trace_id: str | None = None

    # -- durable steps ---------------------------------------------------------

    async def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once per task, or replay what it gave before.

        For durable tasks (``register(..., durable=True)``): the JSON result,
        or the error, is stored under ``(name, occurrence)``; a resumed
        attempt gets it back without calling ``fn`` (an error comes back as
        :class:`~chongming.errors.StepFailed`, on the first run too). A step
        its worker died in has no record and runs again: at least once. A
        coroutine function is awaited; a plain one runs in a worker thread.
        A stop requested before the step is honoured first.
        """
        return await durable_calls.step(self, name, fn, args, kwargs)

    async def effect(
        self,
        op_key: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        commit: Callable[[Any, Any], Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run an operation with side effects once per task, through a ledger in the store.

        If ``op_key`` has a result already, it is returned and nothing runs.
        Otherwise the intent is written first, then ``fn(info, *args,
        **kwargs)`` runs with an :class:`~chongming.task_api.journal.EffectInfo`
        (``info.idempotency_key`` is ``<task>:<op_key>`` in every attempt —
        give it to the external system; ``info.resumed`` says an earlier
        attempt began it and left no result), then ``commit(connection,
        result)`` runs in the store's transaction together with the fencing
        check and the ledger row. Business writes made in ``commit`` on the
        store's database are exactly once; an external call is at least once,
        narrowed by the key. See docs/durable.md for what holds where.
        """
        return await durable_calls.effect(self, op_key, fn, args, kwargs, commit)

    async def sleep(self, name: str, seconds: float) -> None:
        """Sleep ``seconds``, durably: the wake-up time is recorded once, as a step.

        A resumed attempt (its worker died meanwhile) replays the recorded
        time and sleeps only what is left of it; one past it does not sleep.
        Stop and pause take effect while it sleeps. On a worker, a sleep of
        the park threshold or more (``Controller(park_threshold=5.0)``) parks
        the task instead: the attempt ends, the task waits in the queue (no
        slot, no memory) and any worker that serves it replays it at the
        wake-up time. ``seconds``: finite, from 0 to 100 years.
        """
        await durable_calls.sleep(self, name, seconds, beat=self._checkpoint_on_loop)

    async def wait_for_fact(
        self,
        name: str,
        *,
        timeout: float | None = None,
        check: Callable[[], Any] | None = None,
        poll_interval: float = 0.2,
    ) -> Any:
        """Wait until the fact ``name`` was sent to this task (``controller.signal``).

        Returns its value. The store is read before every wait, so a fact sent
        earlier — before this call, or while no worker held the task — is never
        missed. ``check`` (a function, or a coroutine function) is asked too:
        a value other than ``None``/``False`` counts as the fact (read your
        business table there). ``timeout`` seconds without it raise
        :class:`~chongming.errors.FactTimeout`. Fact or timeout is decided
        once and recorded: a replay answers the same. Stop and pause take
        effect while it waits. On a worker, a wait with the park threshold
        (``Controller(park_threshold=5.0)``) or more to go, or no deadline,
        parks the task off its slot at its first look that finds no fact,
        until the fact arrives (sending it wakes the task) or the deadline;
        with a ``check``, only when ``poll_interval`` is the threshold or
        more (each poll is then a claim). ``timeout``: finite seconds (at
        most 100 years) or ``None``; bad arguments raise
        :class:`~chongming.errors.ConfigurationError` before the wait begins.
        """
        return await durable_calls.wait_for_fact(
            self,
            name,
            timeout=timeout,
            check=check,
            poll_interval=poll_interval,
            beat=self._checkpoint_on_loop,
        )

    # -- child tasks and the plane (plane/children.py, docs/children.md) -----

    async def spawn(
        self, name: str, /, *args: Any, key: str | None = None, **kwargs: Any
    ) -> ChildHandle:
        """Enqueue the task ``name`` as a child of this one; its handle (``ctx.gather``).

        Memoised like a step: the enqueue's idempotency key is ``key`` or
        ``<this task's id>:child:<occurrence>``, so a replay never enqueues
        twice. Any worker that serves ``name`` may run it. ``name`` must be
        registered on this controller and the arguments must fit its
        function (checked before anything is written); a ``key`` under which
        this task or an ancestor was enqueued as ``name`` raises
        :class:`~chongming.errors.ChildCycle`.
        """
        return await durable_calls.spawn(self, name, args, kwargs, key)

    async def gather(self, *handles: ChildHandle) -> list[Any]:
        """The results of the children ``handles``, in their order.

        Waits for every one (parked off the slot on a worker) before it
        answers: if any did not succeed, it then raises the
        :class:`~chongming.errors.ChildFailed` of the first such child in
        ``handles`` order. Each outcome is recorded once; a replay answers
        the same.
        """
        return await durable_calls.gather(self, handles, beat=self._checkpoint_on_loop)

    def as_completed(self, *handles: ChildHandle) -> AsyncIterator[ChildEnd]:
        """Each child's :class:`ChildEnd` as it ends: ``async for end in ctx.as_completed(...)``.

        Parks off the slot (on a worker) until the next one ends. Which
        children ended together is recorded once, so a replay sees the same
        ends in the same order. A failed child does not raise here:
        ``end.result()`` does (:class:`~chongming.errors.ChildFailed`). Leave
        the loop early and, until those children are gathered, the task waits
        in its slot instead of parking (docs/children.md).
        """
        return durable_calls.as_completed(self, handles, beat=self._checkpoint_on_loop)

    async def child(self, name: str, /, *args: Any, key: str | None = None, **kwargs: Any) -> Any:
        """Run the task ``name`` as a child and return its result: ``spawn`` then ``gather``.

        A child that did not succeed raises :class:`~chongming.errors.ChildFailed`
        (its id, status and failure text), which this task may catch.
        """
        handle = await self.spawn(name, *args, key=key, **kwargs)
        (result,) = await self.gather(handle)
        return result

    async def enqueue(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """``controller.enqueue(name, ...)`` on the controller that runs this task.

        Not memoised: put it in a ``ctx.step`` with an ``idempotency_key``,
        or use :meth:`spawn`, for once per task.
        """
        journal = durable_calls.durable_journal(self, "ctx.enqueue")
        return await journal.enqueue(name, args, kwargs)

    async def signal(
        self, task_id: str, name: str, payload: Any = None, *, key: str | None = None
    ) -> bool:
        """``controller.signal(...)`` on the controller that runs this task: send a fact."""
        journal = durable_calls.durable_journal(self, "ctx.signal")
        return await journal.signal(task_id, name, payload, key)

    # -- control ---------------------------------------------------------------

    @property
    def is_stop_requested(self) -> bool:
        return self.stop_requested

    @property
    def is_pause_requested(self) -> bool:
        return self.pause_requested

    @property
    def heartbeat(self) -> float:
        """Monotonic time of the last checkpoint (what the idle timeout measures)."""
        return self.last_beat

    def checkpoint(self) -> Checkpoint:
        """Honour stop and pause requests and refresh the heartbeat.

        Raises :class:`TaskCancelled` once a stop was requested. In a thread
        task it blocks while the task is paused; in a coroutine task the
        returned object must be awaited.
        """
        if self.carrier is CarrierKind.COROUTINE:
            if self._unawaited is not None:
                raise self.misuse_error()
            checkpoint = Checkpoint(self)
            self._unawaited = checkpoint
            return checkpoint
        if self.carrier is not CarrierKind.INLINE and threading.get_ident() == self.loop_thread:
            raise CheckpointMisuse(
                "ctx.checkpoint() of a thread task was called on the event-loop thread; "
                "call it from the task function itself"
            )
        self.beat()
        if self.stop_requested:
            raise TaskCancelled(f"task {self.task_id!r} was asked to stop")
        if self.pause_requested and self.carrier is CarrierKind.THREAD:
            self.hold_in_thread()
            self.beat()
            if self.stop_requested:
                raise TaskCancelled(f"task {self.task_id!r} was asked to stop")
        return _COMPLETED

    async def _checkpoint_on_loop(self) -> None:
        self.beat()
        if self.stop_requested:
            raise TaskCancelled(f"task {self.task_id!r} was asked to stop")
        if self.pause_requested:
            await self.hold_on_loop()
            self.beat()
            if self.stop_requested:
                raise TaskCancelled(f"task {self.task_id!r} was asked to stop")
        else:
            await asyncio.sleep(0)

    def enter_carrier(self) -> bool:
        """For executors: call on the carrier right before the function.

        Returns False when the function must not start (stopped or given up
        on while it waited for a worker); the runtime then records that it
        never ran. Otherwise the runtime is told the attempt is now running.
        """
        self.beat()
        return self.enter(from_thread=True)

    @property
    def carrier_signals(self) -> AttemptSignals:
        """For executors whose carrier is another process: the control block to relay.

        Such an executor forwards the stop and pause requests it is told of
        (:meth:`AttemptSignals.relay_requests`) and brings the child's
        heartbeats and pause receipts back; task code never needs it. The
        context is its own control block.
        """
        return self

    def misuse_error(self) -> CheckpointMisuse:
        return CheckpointMisuse(
            f"task {self.task_id!r} is an async def task: ctx.checkpoint() returned an "
            "awaitable that was never awaited; write `await ctx.checkpoint()`"
        )

    @property
    def has_unawaited_checkpoint(self) -> bool:
        return self._unawaited is not None

    # -- reporting -------------------------------------------------------------

    def progress(
        self,
        done: float,
        *,
        total: float | None = None,
        unit: str | None = None,
        message: str | None = None,
    ) -> None:
        """Report how far the task got. Does not refresh the heartbeat."""
        if self._unawaited is not None:
            raise self.misuse_error()
        _check_number("progress done", done)
        if total is not None:
            _check_number("progress total", total)
        for what, text in (("progress unit", unit), ("progress message", message)):
            if text is not None:
                if not isinstance(text, str):
                    raise PayloadError(what, f"must be a string, got {type(text).__name__}")
                check_json_value(text, what)
        self._on_progress(Progress(done=done, total=total, unit=unit, message=message))

    @property
    def logger(self) -> logging.Logger:
        """A logger named ``chongming.task.<task_id>`` (a child of ``chongming.task``).

        It is built outside logging's global registry so that millions of task
        ids do not pile up there; configure handlers and levels on
        ``chongming.task``.
        """
        if self._logger is None:
            logger = logging.Logger(f"chongming.task.{self.task_id}")
            logger.parent = _TASK_LOGGER
            logger.level = logging.NOTSET
            logger.addFilter(TASK_LOG_REDACTION)  # secrets never leave a task logger
            self._logger = logger
        return self._logger

    def log(self, message: str, *args: object) -> None:
        self.logger.info(message, *args)

    def warning(self, message: str, *args: object) -> None:
        self.logger.warning(message, *args)

    def error(self, message: str, *args: object) -> None:
        self.logger.error(message, *args)

    def input(self, node_id: str, default: JsonValue = None) -> JsonValue:
        """The result of a succeeded upstream pipeline node, or ``default``."""
        return self.upstream.get(node_id, default)

    # -- artifacts -------------------------------------------------------------

    @property
    def artifact_root(self) -> Path:
        """The directory under which every attempt of every task gets its ``artifact_dir``."""
        return self._artifact_root

    @property
    def artifact_dir(self) -> Path:
        """A directory of this attempt's own, created on first access.

        A retry gets a fresh directory, so a failed attempt's leftovers never
        leak into the next one.
        """
        if self._artifact_dir is None:
            path = self._artifact_root / _safe_name(self.task_id) / f"attempt-{self.attempt}"
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._artifact_dir = path
        return self._artifact_dir


def _safe_name(task_id: str) -> str:
    cleaned = _UNSAFE.sub("_", task_id)[:80]
    if cleaned == task_id:
        return cleaned
    digest = hashlib.blake2b(task_id.encode(), digest_size=6).hexdigest()
    return f"{cleaned}-{digest}"


def _check_number(what: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PayloadError(what, f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise PayloadError(what, "must be a finite number >= 0")
