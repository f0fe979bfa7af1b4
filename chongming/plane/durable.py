"""Durable steps: one attempt's journal of a task's memoised steps.

Before the function of a durable task begins, its attempt raises the task's
epoch in the store (fencing off any older attempt still running somewhere)
and reads the steps earlier attempts recorded. ``ctx.step(name, fn)`` then
either *replays* a recorded step — returns its stored result, or raises
:class:`StepFailed` with its stored error, without calling ``fn`` — or runs
``fn`` and records what it gave, under the attempt's epoch.

Matching is by ``(name, occurrence)``: the n-th call of a step name in an
attempt is its occurrence n, counted in the order the steps are *called*.
Each step records the step its flow of code called just before it (a flow:
one asyncio task; steps gathered at once each start one, from where their
caller was), and a replay checks that this one was called already. So steps
that finished in any order replay, a step the record does not have may be
inserted anywhere (and replays afterwards like the rest), and a recorded
step called before the one it followed raises :class:`NondeterminismError`
(the code changed: never retried). A step that was running when its worker
died has no record, so it runs again: steps are at least once, and ``fn``
must be safe to repeat (or go through ``ctx.effect``).

The journal's waits (a durable sleep, a fact wait, parking) are in
:mod:`chongming.plane.durable_waits`, its children in
:mod:`chongming.plane.children`; the gate that opens it is
:mod:`chongming.plane.journal_gate`.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import dataclasses
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from chongming.clock import SYSTEM_CLOCK
from chongming.errors import (
    CheckpointMisuse,
    FencingError,
    NondeterminismError,
    PayloadError,
    TaskCancelled,
)
from chongming.executors.base import ThreadBaseException, call_guarded, ends_its_carrier
from chongming.plane import durable_waits
from chongming.plane.any_wait import AnyWaits
from chongming.plane.children import (
    TaskPlane,
    ended_children,
    gathered_ends,
    spawn_child,
)
from chongming.plane.outages import through_outages
from chongming.plane.parking import PARK_AFTER
from chongming.plane.step_outcomes import recorded_failure, replay, replay_error, step_label
from chongming.stores.base import TaskStore
from chongming.stores.durable import (
    FIRST_CALL,
    Commit,
    CommitFailed,
    StaleEpoch,
    StepKey,
    StepRecord,
)
from chongming.task_api.journal import (
    ChildEnd,
    ChildHandle,
    EffectInfo,
    StepObserver,
)
from chongming.task_api.step_threads import StepThreads

__all__ = ["Journal", "RunSync"]

_T = TypeVar("_T")
#: Runs a plain function on a worker thread: ``await run_sync(fn, args, kwargs)``.
RunSync = Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Awaitable[Any]]

#: How long a cancelled attempt still waits for the write of a step it ran (seconds).
RECORD_KEEP = 5.0

_log = logging.getLogger("chongming.control")

#: The step the current flow of a task's code called last, and whose journal
#: it is: each asyncio task (a step gathered with others) starts from the
#: value its creator had, so steps run at once each follow what came before.
_LAST_CALL: contextvars.ContextVar[tuple[Journal, StepKey] | None] = contextvars.ContextVar(
    "chongming_last_step", default=None
)


class Journal:
    """One attempt's view of its task's steps. Loop thread only."""

    __slots__ = (
        "_called",
        "_diverged",
        "_fenced_why",
        "_recorded",
        "_replayed",
        "_seen",
        "_store",
        "_sync",
        "any_waits",
        "epoch",
        "observe",
        "park_threshold",
        "parkable",
        "plane",
        "task_id",
        "threads",
    )

    def __init__(
        self,
        store: TaskStore,
        task_id: str,
        epoch: int,
        recorded: list[StepRecord],
        *,
        run_sync: RunSync | None = None,
    ) -> None:
        self._store = store
        self._sync = _in_a_thread if run_sync is None else run_sync
        self.task_id = task_id
        self.epoch = epoch
        self._recorded = {(step.name, step.occurrence): step for step in recorded}
        self._called: set[StepKey] = set()
        self._replayed = 0
        self._seen: collections.Counter[str] = collections.Counter()
        self._fenced_why: str | None = None
        self._diverged: NondeterminismError | None = None
        #: A worker's claimed run: a long sleep parks the task instead of holding the slot.
        self.parkable = False
        #: A sleep or fact wait with this long (seconds) or more to go parks, if parkable.
        self.park_threshold = PARK_AFTER
        #: Plain functions of this attempt on worker threads: its end waits for them.
        self.threads = StepThreads()
        #: The observers' wrapper of each durable call (tracing's step spans), or None.
        self.observe: StepObserver | None = None
        #: The controller that runs this attempt (ctx.child, ctx.enqueue), or None.
        self.plane: TaskPlane | None = None
        #: Facts waited for together (ctx.as_completed): see control/any_wait.py.
        self.any_waits = AnyWaits()

    @property
    def store(self) -> TaskStore:
        return self._store

    @property
    def replays(self) -> int:
        """Recorded outcomes this attempt replayed so far."""
        return self._replayed

    @property
    def replaying(self) -> bool:
        """True while recorded steps remain to be replayed."""
        return self._replayed < len(self._recorded)

    def check_fenced(self) -> None:
        """Raise :class:`FencingError` once this attempt was found replaced.

        Also raises the :class:`NondeterminismError` this attempt met again:
        once code and record disagree, nothing further of the record is used.
        """
        if self._fenced_why is not None:
            raise FencingError(self.task_id, self.epoch, self._fenced_why)
        if self._diverged is not None:
            raise self._diverged

    def occurrence_of(self, name: str) -> int:
        """The occurrence the next call of step ``name`` will have in this attempt."""
        return self._seen[name]

    def peek(self, name: str) -> StepRecord | None:
        """The record the next call of ``name`` would replay (the call is not made)."""
        return self._recorded.get((name, self._seen[name]))

    async def spawn(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str | None,
        options: Mapping[str, Any] | None = None,
    ) -> ChildHandle:
        self.check_fenced()
        return await spawn_child(self, self._store, self.plane, name, args, kwargs, key, options)

    async def gathered(
        self, handles: Sequence[ChildHandle], beat: Callable[[], Awaitable[None]]
    ) -> list[ChildEnd]:
        self.check_fenced()
        return await gathered_ends(self, handles, beat)

    def as_completed(
        self, handles: Sequence[ChildHandle], beat: Callable[[], Awaitable[None]]
    ) -> AsyncIterator[ChildEnd]:
        self.check_fenced()
        return ended_children(self, handles, beat)

    async def enqueue(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return await self._require_plane("ctx.enqueue").enqueue(name, *args, **kwargs)

    async def signal(self, task_id: str, name: str, payload: Any, key: str | None) -> bool:
        return await self._require_plane("ctx.signal").signal(task_id, name, payload, key=key)

    def _require_plane(self, call: str) -> TaskPlane:
        if self.plane is None:
            raise CheckpointMisuse(
                f"{call}() needs the controller that runs this task; this journal has none "
                "(run the task on a Controller with a store)"
            )
        return self.plane

    def call_of(self, name: str) -> tuple[StepKey, StepKey, StepRecord | None]:
        """This call of ``name``: its key, the step its flow called before, its record.

        A recorded step whose recorded predecessor was not called yet in this
        attempt came out of order: :class:`NondeterminismError`.
        """
        occurrence = self._seen[name]
        self._seen[name] = occurrence + 1
        key = (name, occurrence)
        last = _LAST_CALL.get()
        after = last[1] if last is not None and last[0] is self else FIRST_CALL
        _LAST_CALL.set((self, key))
        recorded = self._recorded.get(key)
        if recorded is not None:
            before = recorded.after
            if before is not None and before != FIRST_CALL and before not in self._called:
                self._diverged = NondeterminismError(
                    self.task_id, step_label(key), step_label(before)
                )
                raise self._diverged
            self._replayed += 1
        self._called.add(key)
        return key, after, recorded

    async def step(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self.check_fenced()
        (_, occurrence), after, recorded = self.call_of(name)
        if recorded is not None:
            return replay(recorded)
        try:
            value = await self.call(
                fn, args, kwargs, label=f"step {step_label((name, occurrence))!r}"
            )
        except (TaskCancelled, asyncio.CancelledError, ThreadBaseException):
            # A stop is not the step's outcome, nor a SystemExit: nothing is recorded.
            raise
        except Exception as error:
            stored = await self.record(
                StepRecord(
                    name=name,
                    occurrence=occurrence,
                    ok=False,
                    value=recorded_failure(error),
                    after=after,
                )
            )
            raise replay_error(stored) from error
        step = StepRecord(name=name, occurrence=occurrence, ok=True, value=value, after=after)
        try:
            stored = await self.record(step)
        except PayloadError as error:  # a result no store can keep: record that it failed
            failed = dataclasses.replace(step, ok=False, value=recorded_failure(error))
            stored = await self.record(failed)
            raise replay_error(stored) from error
        return replay(stored)

    async def written_step(
        self, name: str, write: Callable[[StepRecord], Awaitable[StepRecord]]
    ) -> Any:
        """A step whose effect and record are one store call: ``write(template)`` answers it.

        ``template`` is the record to write (name, occurrence, predecessor),
        its value left for ``write`` to fill in; a recorded one replays
        without calling ``write``. Fenced, and kept through a cancellation,
        like :meth:`record`.
        """
        self.check_fenced()
        (_, occurrence), after, recorded = self.call_of(name)
        if recorded is not None:
            return replay(recorded)
        template = StepRecord(name=name, occurrence=occurrence, ok=True, value=None, after=after)
        return replay(await self._kept(lambda: write(template)))

    async def wait_for_fact(
        self,
        name: str,
        *,
        timeout: float | None,
        check: Callable[[], Any] | None,
        poll_interval: float,
        beat: Callable[[], Awaitable[None]],
    ) -> Any:
        """The fact ``name`` (or what ``check`` found), or :class:`FactTimeout`: decided once."""
        return await durable_waits.wait_for_fact(
            self, name, timeout=timeout, check=check, poll_interval=poll_interval, beat=beat
        )

    async def sleep(
        self, name: str, seconds: float, *, beat: Callable[[], Awaitable[None]]
    ) -> None:
        """Sleep until a wake-up time recorded once: a replay sleeps only what is left."""
        await durable_waits.sleep(self, name, seconds, beat=beat)

    async def clock_offset(self) -> float:
        """How far the store's clock is ahead of this node's (seconds, may be negative)."""
        before = SYSTEM_CLOCK.time()
        store_now = (await through_outages(self._store.store_time)).timestamp()
        return store_now - (before + SYSTEM_CLOCK.time()) / 2

    async def effect(
        self,
        op_key: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        commit: Commit | None,
    ) -> Any:
        """An operation through the ledger: its stored result, or ``fn`` then ``commit``.

        The intent is written before ``fn`` runs; the result, ``commit`` and
        the fencing check are one transaction of the store. Effects are found
        by key, not by order: they may come anywhere among the steps.
        """
        self.check_fenced()
        state = await self._fenced(
            lambda: self._store.begin_effect(self.task_id, self.epoch, op_key)
        )
        if state.done:
            return state.result
        info = EffectInfo(idempotency_key=f"{self.task_id}:{op_key}", resumed=state.resumed)
        result = await self.call(fn, (info, *args), kwargs, label=f"effect {op_key!r}")
        try:
            return await self._fenced(
                lambda: self._store.finish_effect(self.task_id, self.epoch, op_key, result, commit)
            )
        except CommitFailed as error:
            cause = error.__cause__
            raise (cause if cause is not None else error) from None

    async def call(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        label: str,
    ) -> Any:
        """Await a coroutine function here; run a plain one on the host's worker threads.

        A plain one is counted in :attr:`threads` until its thread really
        returns, not until this await ends: a cancelled await abandons the
        thread, and the attempt's end waits for it. A ``SystemExit`` (or any
        ``BaseException`` of the function's own) comes out as
        :class:`ThreadBaseException`, so it can end neither the loop nor a
        gathered task's parent; it is not recorded as the step's outcome.
        """
        if inspect.iscoroutinefunction(fn):
            try:
                return await fn(*args, **kwargs)
            except BaseException as error:
                if ends_its_carrier(error):
                    raise ThreadBaseException(error) from error
                raise
        threads = self.threads
        call = threads.begin(label)

        def tracked() -> Any:
            if not call.enter():
                call.leave()  # its awaiter gave up before this thread took it
                return None
            try:
                return call_guarded(fn, *args, **kwargs)
            finally:
                call.leave()

        try:
            result = await self._sync(tracked, (), {})
        except BaseException:
            threads.abandon(call)  # cancelled: counted until its thread returns
            raise
        if inspect.isawaitable(result):
            return await result
        return result

    async def _fenced(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call()`` through store outages; a stale epoch fences this attempt off for good."""
        try:
            return await through_outages(call)
        except StaleEpoch as error:
            self._fenced_why = str(error)
            raise FencingError(self.task_id, self.epoch, str(error)) from None

    async def record(self, step: StepRecord) -> StepRecord:
        """Write ``step``; a cancellation (a close's hand-back, a stop) waits for the write.

        What is recorded has happened (a body ran, a fact was decided): a
        write cut by the cancel would make the next attempt run the body
        again. The write gets up to ``RECORD_KEEP`` seconds more; a stale
        epoch still fences it off, so a write landing late is harmless.
        """
        return await self._kept(lambda: self._store.record_step(self.task_id, self.epoch, step))

    async def record_many(self, steps: Sequence[StepRecord]) -> list[StepRecord]:
        """:meth:`record` of each of ``steps``, in order, in one store call."""
        return await self._kept(lambda: self._store.record_steps(self.task_id, self.epoch, steps))

    async def _kept(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call()`` fenced and through outages; a cancellation waits up to RECORD_KEEP for it."""
        write = asyncio.ensure_future(self._fenced(call))
        try:
            return await asyncio.shield(write)
        except asyncio.CancelledError:
            done, _ = await asyncio.wait((write,), timeout=RECORD_KEEP)
            if not done:
                write.cancel()
            elif not write.cancelled():
                write.exception()  # retrieved: its outcome is the cancelled attempt's
            raise


async def _in_a_thread(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Without a host's threads (a journal made by hand): the loop's default executor."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))
