"""Pruning: apply retention rules in bounded batches, once (the CLI) or in the background.

:func:`prune_store` runs each rule's batches until one comes back short,
with a pause between batches, so a prune takes the store's write path in
short turns and the claims of the workers beside it go on between them. A
dry run counts instead and deletes nothing.

:class:`BackgroundPruner` is what ``Controller(retention=..., work=True)``
owns: every ``retention.interval`` seconds it prunes with the rules as of
that moment (the controller's clock), at a low rate (``retention.pause``
between batches). Several workers of a fleet may each run one: the stores
delete with row locks taken ``SKIP LOCKED`` (PostgreSQL) or one writer at a
time (SQLite), so concurrent prunes take disjoint tasks and each task is
deleted once; the extra cost is an empty batch now and then. No leader is
elected for it. A store failure is logged and tried again at the next
interval; the worker's tasks run on regardless.

Cancellation: cancelling :func:`prune_store` leaves the batch in flight with
an unknown outcome (it may have committed); what it deleted stays deleted,
and running it again is safe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence

from chongming.background import BackgroundTask
from chongming.clock import SYSTEM_CLOCK, Clock, to_datetime
from chongming.errors import InvalidRetention, StoreClosed, StoreError
from chongming.stores.base import TaskStore
from chongming.stores.ports.retention import RetentionStore
from chongming.stores.retention import PruneSelection, Retention, check_batch, selections

__all__ = [
    "BackgroundPruner",
    "PruneReport",
    "PrunerStatistics",
    "check_retention",
    "prune_store",
    "pruner_for",
]

_log = logging.getLogger("chongming.retention")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PruneReport:
    """What one prune did (or, for a dry run, would do): tasks per rule, in rule order."""

    dry_run: bool
    by_rule: tuple[int, ...]
    batches: int
    seconds: float

    @property
    def tasks(self) -> int:
        return sum(self.by_rule)


async def prune_store(
    store: TaskStore,
    rules: Sequence[PruneSelection],
    *,
    batch: int,
    pause: float = 0.0,
    dry_run: bool = False,
) -> PruneReport:
    """Apply ``rules`` one after the other in batches of ``batch`` tasks; what was done."""
    check_batch(batch)
    loop = asyncio.get_running_loop()
    started = loop.time()
    counts: list[int] = []
    batches = 0
    for rule in rules:
        if dry_run:
            counts.append(await store.count_prunable(rule))
            continue
        total = 0
        while True:
            deleted = await store.prune_tasks(rule, limit=batch)
            batches += 1
            total += deleted
            if deleted < batch:
                break
            await asyncio.sleep(pause)  # the write path is the workers' between batches
        counts.append(total)
    return PruneReport(
        dry_run=dry_run, by_rule=tuple(counts), batches=batches, seconds=loop.time() - started
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PrunerStatistics:
    """A background pruner's counters: rounds run, tasks deleted, rounds that failed."""

    rounds: int
    deleted: int
    failures: int
    last_error: str | None


class BackgroundPruner:
    """Prunes by ``retention`` every ``retention.interval`` seconds (see the module docstring)."""

    def __init__(self, store: TaskStore, retention: Retention, *, clock: Clock | None = None):
        self._store = store
        self._retention = retention
        self._clock = clock or SYSTEM_CLOCK
        self._loop = BackgroundTask("chongming:pruner")
        self._rounds = 0
        self._deleted = 0
        self._failures = 0
        self._last_error: str | None = None
        self._round_done = asyncio.Event()

    @property
    def retention(self) -> Retention:
        return self._retention

    def statistics(self) -> PrunerStatistics:
        return PrunerStatistics(
            rounds=self._rounds,
            deleted=self._deleted,
            failures=self._failures,
            last_error=self._last_error,
        )

    def start(self) -> None:
        """Start the loop (the first round at once). Idempotent."""
        self._loop.start(self._run)

    async def wait_round(self) -> None:
        """Return after the next round ends (done or failed): for tests and the CLI."""
        self._round_done.clear()
        await self._round_done.wait()

    async def prune_now(self) -> PruneReport:
        """One round by the rules as of now (what the loop does each interval)."""
        now = to_datetime(self._clock.time())
        retention = self._retention
        return await prune_store(
            self._store, selections(retention, now), batch=retention.batch, pause=retention.pause
        )

    async def _run(self) -> None:
        while True:
            try:
                report = await self.prune_now()
            except StoreClosed:
                return  # the controller is closing the store under us
            except StoreError as error:
                self._failures += 1
                self._last_error = f"{type(error).__name__}: {error}"
                _log.warning("retention: a prune failed, trying again later: %s", error)
            else:
                self._deleted += report.tasks
                if report.tasks:
                    _log.info(
                        "retention: pruned %d terminal tasks in %.2f s",
                        report.tasks,
                        report.seconds,
                    )
            self._rounds += 1
            self._round_done.set()
            await asyncio.sleep(self._retention.interval)

    async def aclose(self) -> None:
        """Cancel the loop and wait for it (a batch in flight ends with an unknown outcome)."""
        await self._loop.stop()  # a pruner that had died of an error is logged there


def check_retention(retention: object, *, work: bool) -> None:
    """``Controller(retention=)``: a :class:`Retention`, on a worker (``work=True``)."""
    if retention is None:
        return
    if not isinstance(retention, Retention):
        raise InvalidRetention(
            "retention",
            f"must be a Retention, got {type(retention).__name__}",
            "pass Retention(terminal=timedelta(days=7), ...)",
        )
    if not work:
        raise InvalidRetention(
            "retention",
            "is applied by a worker",
            "pass Controller(store=..., work=True, retention=...), or run `chongming prune`",
        )


def pruner_for(
    retention: object, store: TaskStore, *, clock: Clock | None = None
) -> BackgroundPruner | None:
    """A worker's pruner for ``retention=`` (``None``: keep everything)."""
    if retention is None:
        return None
    check_retention(retention, work=True)
    assert isinstance(retention, Retention)
    if type(store).prune_tasks is RetentionStore.prune_tasks:
        raise InvalidRetention(
            "retention", f"{type(store).__name__} cannot prune", "use a store with retention"
        )
    return BackgroundPruner(store, retention, clock=clock)
