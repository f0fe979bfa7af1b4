"""Write-through: every transition of every run reaches the store, in order, with no hole.

The host calls :meth:`WriteThrough.record` on each transition (the hot
path: a dict lookup and a flag). One flusher task turns the runs that moved
into a batch of :class:`StateWrite` — for each run its latest snapshot plus
every transition since the last durable version, compare-and-set on that
version — and hands it to :meth:`TaskStore.apply_writes`. Transitions that
pile up while a write is in flight are coalesced into the next one, so a
trivial task costs about three writes (create, ``starting``, the rest).

Waiting for durability:

- ``created(run)`` — submit: the task exists in the store, or the store's
  error is raised (nothing was written);
- ``durable(run, version)`` — the launch gate: never start user code before
  the store holds ``starting``; keeps waiting while the store fails (a start
  the store does not know of would be reported adoptable after a crash);
- ``settled(run)`` — ``wait()``: the terminal transition is durable, or the
  store is failing (then :attr:`failures` says the write is pending).

A store failure never fails a task and never drops a transition: failed
writes stay pending and are retried with backoff. A conflict means the store
moved on without us (another node reconciled the task while this one was
away): the run is *let go* — nothing more is written for it, and why is
recorded.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from chongming.background import BackgroundTask
from chongming.clock import SYSTEM_CLOCK, Clock, to_datetime
from chongming.errors import DuplicateTaskId, StoreClosed, StoreError
from chongming.plane.failures import PersistFailures
from chongming.state.error_text import describe_error
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.writes import WRITTEN, StateWrite, WriteOutcome, WriteResult

__all__ = ["WriteThrough"]

_log = logging.getLogger("chongming.control")


class _Entry:
    """What the writer knows of one run with unwritten versions or waiters."""

    __slots__ = (
        "create_error",
        "created",
        "creation",
        "dirty",
        "let_go",
        "run",
        "stored",
        "uncertain",
        "waiters",
    )

    def __init__(self, run: Any) -> None:
        self.run = run
        self.stored = 0  # highest durable version
        self.created = False
        self.dirty = False
        self.let_go: str | None = None
        self.creation: asyncio.Future[None] | None = None
        self.create_error: BaseException | None = None  # the store refused the task
        # A write failed with an unknown outcome (it may have committed): a later
        # conflict is checked against what the store holds before letting go.
        self.uncertain = False
        # (version, strict, future): strict waiters keep waiting while the store fails.
        self.waiters: list[tuple[int, bool, asyncio.Future[bool]]] = []


class WriteThrough:
    """See the module docstring. Owned by the control plane, which starts and closes it."""

    def __init__(
        self,
        store: TaskStore,
        *,
        max_batch: int = 500,
        retry_initial: float = 0.05,
        retry_max: float = 2.0,
        on_let_go: Callable[[Any, str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._store = store
        self._clock = clock  # when the store began failing (persist_failures.failing_since)
        self._max_batch = max_batch
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._on_let_go = on_let_go
        self._entries: dict[str, _Entry] = {}
        self._dirty: deque[_Entry] = deque()
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._flusher = BackgroundTask("chongming:write-through")
        self._failed_writes = 0
        self._last_error: str | None = None
        self._failing_since: float | None = None
        self._let_go: dict[str, str] = {}
        self._dead: str | None = None  # the store was closed under us
        #: An Observers fan-out (controller/observers.py) that times and traces each batch.
        self.observer: Any = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._flusher.start(self._flush_forever)

    async def aclose(self, timeout: float) -> None:
        """Write what is pending (for at most ``timeout`` seconds), then stop."""
        if not self._flusher.running:
            return
        idle = self._idle
        if idle is not None and self._dead is None and (self._dirty or not idle.is_set()):
            try:
                async with asyncio.timeout(timeout):
                    while (self._dirty or not idle.is_set()) and self._dead is None:
                        await idle.wait()
                        await asyncio.sleep(0)
            except TimeoutError:
                pass
        await self._flusher.stop()
        pending = self.failures()
        if pending.pending_transitions:
            _log.error(
                "closing with %d transitions of %d tasks not written to the store (%s)",
                pending.pending_transitions,
                pending.pending_tasks,
                pending.last_error,
            )
        for entry in self._entries.values():
            self._release_waiters(entry, False)
            if not entry.created and entry.create_error is None:
                self._fail_creation(entry, StoreClosed("the controller is closing"))

    # -- the hot path ----------------------------------------------------------------

    def record(self, run: Any) -> None:
        """``run`` moved: make sure its new versions will be written."""
        entry = self._entries.get(run.task_id)
        if entry is None:
            entry = self._entries[run.task_id] = _Entry(run)
        elif entry.let_go is not None or entry.dirty:
            return
        entry.dirty = True
        self._dirty.append(entry)
        wake = self._wake
        if wake is not None and not wake.is_set():
            wake.set()

    def adopt(self, run: Any, version: int) -> None:
        """``run`` is a task the store already holds at ``version`` (claimed from the queue).

        Its next write is a compare-and-set from ``version``, never a create.
        """
        entry = self._entries.get(run.task_id)
        if entry is None:
            entry = self._entries[run.task_id] = _Entry(run)
        entry.created = True
        entry.stored = version

    # -- waiting for durability ----------------------------------------------------

    async def created(self, run: Any) -> None:
        """Return once the task exists in the store; raise the store's error if not."""
        creation = self.creation(run)
        if creation is not None:
            await asyncio.shield(creation)  # a cancelled caller leaves it to the next

    def creation(self, run: Any) -> asyncio.Future[None] | None:
        """What a submit awaits: resolved once the task exists in the store, or with the
        store's error if it cannot; None when it exists already.

        Awaited directly (no task, no shield: the submit's hot path); a submitter
        cancelled meanwhile cancels it and asks again for a new one.
        """
        entry = self._entries.get(run.task_id)
        if entry is None or entry.created:
            return None
        creation = entry.creation
        if creation is None or creation.cancelled():
            creation = entry.creation = asyncio.get_running_loop().create_future()
            if entry.create_error is not None:
                creation.set_exception(entry.create_error)
        return creation

    def forget(self, run: Any) -> None:
        """Drop a run whose creation failed (submit raised; nothing is left behind)."""
        entry = self._entries.pop(run.task_id, None)
        if entry is not None:
            self._release_waiters(entry, False)

    async def durable(self, run: Any, version: int) -> bool:
        """True once ``version`` is durable; False if the run was let go. Waits through failures."""
        if self._dead is not None:
            return False
        entry = self._entries.get(run.task_id)
        if entry is None or entry.stored >= version:
            return entry is None or entry.let_go is None
        if entry.let_go is not None:
            return False
        return await self._wait(entry, version, strict=True)

    def settled(self, run: Any) -> asyncio.Future[bool] | None:
        """A future for ``wait()``: the run's last version is durable, or the store fails.

        ``None`` when there is nothing to wait for.
        """
        entry = self._entries.get(run.task_id)
        if entry is None or entry.let_go is not None or entry.stored >= run.status_version:
            return None
        if self._failing_since is not None or self._dead is not None:
            return None
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry.waiters.append((run.status_version, False, future))
        return future

    async def _wait(self, entry: _Entry, version: int, *, strict: bool) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry.waiters.append((version, strict, future))
        return await asyncio.shield(future)

    # -- health ------------------------------------------------------------------------

    @property
    def failing(self) -> bool:
        return self._failing_since is not None or self._dead is not None

    def failures(self) -> PersistFailures:
        pending_tasks = 0
        pending_transitions = 0
        for entry in self._entries.values():
            if entry.let_go is None:
                behind = entry.run.status_version - entry.stored
                if behind > 0:
                    pending_tasks += 1
                    pending_transitions += behind
        since = self._failing_since
        return PersistFailures(
            failed_writes=self._failed_writes,
            pending_tasks=pending_tasks,
            pending_transitions=pending_transitions,
            last_error=self._dead or self._last_error,
            failing_since=None if since is None else to_datetime(since),
            let_go=tuple(self._let_go.items()),
        )

    def unwritten(self) -> list[tuple[TaskStatus | None, TaskStatus]]:
        """Runs whose latest status the store does not hold yet: (stored status, status now).

        The stored status is ``None`` when the task is not in the store at all.
        ``stats()`` counts from the store and moves these to where they are.
        """
        moved: list[tuple[TaskStatus | None, TaskStatus]] = []
        for entry in self._entries.values():
            run = entry.run
            if entry.let_go is not None or run.status_version <= entry.stored:
                continue
            stored: TaskStatus | None = None
            if entry.created and entry.stored > 0:
                since = run.transitions_since(entry.stored - 1)
                if since and since[0].version == entry.stored:
                    stored = since[0].to_status
            moved.append((stored, run.status))
        return moved

    def is_let_go(self, task_id: str) -> bool:
        return task_id in self._let_go

    # -- the flusher -------------------------------------------------------------------

    async def _flush_forever(self) -> None:
        assert self._wake is not None
        assert self._idle is not None
        delay = self._retry_initial
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dirty and self._dead is None:
                batch = self._take_batch()
                if not batch:
                    break
                self._idle.clear()
                try:
                    failed = await self._write(batch)
                finally:
                    self._idle.set()
                if failed:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self._retry_max)
                else:
                    delay = self._retry_initial

    def _take_batch(self) -> list[_Entry]:
        batch: list[_Entry] = []
        dirty = self._dirty
        while dirty and len(batch) < self._max_batch:
            entry = dirty.popleft()
            entry.dirty = False
            if entry.let_go is None and entry.run.status_version > entry.stored:
                batch.append(entry)
        return batch

    async def _write(self, batch: list[_Entry]) -> bool:
        """Write one batch; True if any write failed (the caller backs off)."""
        writes = []
        for entry in batch:
            run = entry.run
            writes.append(
                StateWrite(
                    snapshot=run.snapshot,
                    transitions=run.transitions_since(entry.stored),
                    expect_version=entry.stored if entry.created else None,
                    trusted=True,  # the run made and checked them: the store need not again
                )
            )
        try:
            if self.observer is None:
                results = await self._store.apply_writes(writes)
            else:
                results = await self.observer.store_write(self._store, writes)
        except StoreClosed as error:
            self._dead = f"the store was closed under a running controller: {error}"
            _log.error("%s; %d tasks' transitions stay unwritten", self._dead, len(batch))
            for entry in batch:
                self._fail_creation(entry, error)
            # Nothing will ever be written: nobody may wait for it (a start
            # waiting for its "starting" to be durable does not begin).
            for entry in self._entries.values():
                self._release_waiters(entry, False)
            return True
        except Exception as error:  # a backend bug must not kill the writer
            _log.exception("apply_writes raised; retrying the batch")
            results = [WriteResult(outcome=WriteOutcome.FAILED, error=error)] * len(batch)
        failed = False
        for entry, write, result in zip(batch, writes, results, strict=True):
            if result is _WRITTEN_FAST and not entry.waiters and entry.creation is None:
                # The common case, inline: written, nobody waits (see _settle).
                entry.created = True
                entry.uncertain = False
                entry.stored = write.snapshot.status_version
                run = entry.run
                if run.status_version > entry.stored:
                    self._redirty(entry)
                elif run.done:
                    del self._entries[run.task_id]
                continue
            if entry.uncertain and result.outcome in (
                WriteOutcome.CONFLICT,
                WriteOutcome.DUPLICATE,
            ):
                result = await self._verify(entry, result)
            if self._settle(entry, write, result):
                failed = True
        if not failed and self._failing_since is not None:
            _log.warning("the store takes writes again")
            self._failing_since = None
        return failed

    async def _verify(self, entry: _Entry, result: WriteResult) -> WriteResult:
        """A conflict after an unknown outcome: did our earlier write commit after all?

        If the store holds exactly our own transitions up to some version we
        have, that write committed: carry on from there. Anything else is a
        real conflict.
        """
        run = entry.run
        try:
            stored = await self._store.get(run.task_id)
            history = await self._store.history(run.task_id) if stored is not None else []
        except StoreError:
            return WriteResult(outcome=WriteOutcome.FAILED, error=result.error)
        if stored is None:
            return result
        version = stored.status_version
        ours = run.transitions_since(0)
        if entry.stored <= version <= run.status_version and history == ours[:version]:
            entry.stored = version
            entry.created = True
            entry.uncertain = False
            return _ADOPTED
        return result

    def _settle(self, entry: _Entry, write: StateWrite, result: WriteResult) -> bool:
        outcome = result.outcome
        run = entry.run
        if outcome is _ADOPTED.outcome and result is _ADOPTED:
            # An earlier write of ours had committed (see _verify).
            if entry.creation is not None and not entry.creation.done():
                entry.creation.set_result(None)
            self._release_waiters(entry, True)
            self._redirty(entry)
            return False
        if outcome is WriteOutcome.WRITTEN:
            entry.created = True
            entry.uncertain = False
            entry.stored = write.snapshot.status_version
            if entry.creation is not None and not entry.creation.done():
                entry.creation.set_result(None)
            if entry.waiters:
                self._release_waiters(entry, True)
            if run.status_version > entry.stored:
                self._redirty(entry)
            elif run.done and not entry.waiters:
                del self._entries[run.task_id]
            return False
        if outcome is WriteOutcome.FAILED:
            entry.uncertain = True
            self._failed_writes += 1
            error = result.error
            self._last_error = "unknown store error" if error is None else describe_error(error)
            if self._failing_since is None:
                self._failing_since = self._clock.time()
                _log.warning("the store refuses writes (%s); keeping them", self._last_error)
                self._release_lenient()
            if not entry.created:
                self._fail_creation(entry, result.error)  # submit raises; nothing is kept
            else:
                self._redirty(entry)
            return True
        if outcome is WriteOutcome.DUPLICATE and not entry.created:
            self._fail_creation(entry, DuplicateTaskId(run.task_id))
            return False
        reasons = {
            WriteOutcome.CONFLICT: "the stored version moved on without this node "
            "(reconciled by another node while this one was away?)",
            WriteOutcome.NOT_FOUND: "the task is gone from the store",
            WriteOutcome.DUPLICATE: "another task with this id exists in the store",
        }
        self._give_up(entry, reasons[outcome])
        return False

    def _redirty(self, entry: _Entry) -> None:
        if not entry.dirty:
            entry.dirty = True
            self._dirty.append(entry)
            assert self._wake is not None
            self._wake.set()

    def _fail_creation(self, entry: _Entry, error: BaseException | None) -> None:
        """The task could not be created: its submit raises this (it forgets the run)."""
        entry.create_error = error or StoreError("the store did not take the task")
        creation = entry.creation
        if creation is not None and not creation.done():
            creation.set_exception(entry.create_error)

    def _give_up(self, entry: _Entry, reason: str) -> None:
        task_id = entry.run.task_id
        entry.let_go = reason
        self._let_go[task_id] = reason
        _log.warning("letting task %r go: %s; nothing more is written for it", task_id, reason)
        self._release_waiters(entry, False)
        if self._on_let_go is not None:
            try:
                self._on_let_go(entry.run, reason)
            except Exception:
                _log.exception("letting task %r go failed", task_id)

    def _release_waiters(self, entry: _Entry, written: bool) -> None:
        if not entry.waiters:
            return
        keep: list[tuple[int, bool, asyncio.Future[bool]]] = []
        for version, strict, future in entry.waiters:
            if future.done():
                continue
            if not written:
                future.set_result(False)
            elif entry.stored >= version:
                future.set_result(True)
            else:
                keep.append((version, strict, future))
        entry.waiters = keep

    def _release_lenient(self) -> None:
        """The store started failing: ``wait()`` callers stop waiting (strict ones go on)."""
        for entry in self._entries.values():
            keep: list[tuple[int, bool, asyncio.Future[bool]]] = []
            for version, strict, future in entry.waiters:
                if strict:
                    keep.append((version, strict, future))
                elif not future.done():
                    future.set_result(False)
            entry.waiters = keep


#: What ``_verify`` answers when an earlier write of ours had committed.
_ADOPTED = WriteResult(outcome=WriteOutcome.WRITTEN)
#: Outcomes that may hide an earlier write of ours that committed after all (see _verify).
_LOST = (WriteOutcome.CONFLICT, WriteOutcome.DUPLICATE)
#: What the built-in stores answer for a write that committed (one shared instance).
_WRITTEN_FAST = WRITTEN
