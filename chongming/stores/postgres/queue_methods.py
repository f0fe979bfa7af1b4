"""The store port's work-queue methods on PostgreSQL: checks, identities, then the queue.

The work itself is :class:`~chongming.stores.postgres.queue.WorkQueue`
(enqueues) and :mod:`chongming.stores.postgres.claims` (claims and starts);
this mixin is what :class:`PostgresTaskStore` exposes of them.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.durable import Fact
from chongming.stores.granted import GrantAsk, GrantedClaim
from chongming.stores.identity import IdentityCache
from chongming.stores.postgres.driver import translating
from chongming.stores.postgres.listener import CommandListener
from chongming.stores.postgres.queue import WorkQueue
from chongming.stores.postgres.schema import SchemaState
from chongming.stores.queue import ClaimedTask, Enqueued, Serves, check_trace_carrier

__all__ = ["QueueMethods"]

log = logging.getLogger("chongming.stores.postgres")


class QueueMethods:
    """The store port's work-queue methods, for :class:`PostgresTaskStore` (its ``_queue``).

    A claim remembers the identity of what it read, so the claimer's next save
    of each task writes only the mutable columns (see stores/identity.py).
    """

    _queue: WorkQueue
    _end_listener: CommandListener
    _identities: IdentityCache
    _schema: str
    _warned_untraced = False

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        async def open(self) -> None: ...

        def _scrub(self, text: str) -> str: ...

        _state: SchemaState | None

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
        facts: Sequence[Fact] = (),
    ) -> Enqueued:
        if connection is not None or trace_carrier is not None:
            await self.open()  # the schema must exist before the caller's transaction uses it
        if trace_carrier is not None and self._state is not None and not self._state.traces:
            check_trace_carrier(trace_carrier)  # a bad one is still refused
            if not self._warned_untraced:
                log.warning(
                    "this role may not write %s.trace_carriers (granted before migration "
                    "0008?): enqueues go untraced; GRANT INSERT, UPDATE on it to trace them",
                    self._schema,
                )
                self._warned_untraced = True
            trace_carrier = None
        return await self._queue.enqueue(
            snapshot, transitions, connection=connection, trace_carrier=trace_carrier, facts=facts
        )

    async def enqueue_many(
        self,
        items: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
    ) -> list[Enqueued | Exception]:
        if connection is not None or trace_carrier is not None:
            await self.open()
        if trace_carrier is not None and self._state is not None and not self._state.traces:
            check_trace_carrier(trace_carrier)
            trace_carrier = None  # untraced, as enqueue says (it warns once)
        return await self._queue.enqueue_many(
            items, connection=connection, trace_carrier=trace_carrier
        )

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
    ) -> list[TaskSnapshot]:
        claimed = await self._queue.claims.claim(
            owner, serves, buckets, limit, exclude_tags, tags, age_step
        )
        for snapshot in claimed:
            self._identities.remember(snapshot)
        return claimed

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
        at: datetime,
    ) -> list[ClaimedTask]:
        claimed = await self._queue.claims.claim_started(
            owner, serves, buckets, limit, exclude_tags, at, tags, age_step
        )
        for task in claimed:
            self._identities.remember(task.snapshot)
        return claimed

    async def start_claimed(
        self, owner: str, claimed: Sequence[TaskSnapshot], *, at: datetime
    ) -> list[ClaimedTask]:
        started = await self._queue.claims.start_claimed(owner, claimed, at)
        for task in started:
            self._identities.remember(task.snapshot)
        return started

    async def claim_granted(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        tags: Collection[str] | None = None,
        age_step: float | None = None,
        at: datetime,
        grants: GrantAsk,
    ) -> GrantedClaim:
        claimed = await self._queue.claims.claim_granted(
            owner, serves, buckets, limit, exclude_tags, at, tags, age_step, grants
        )
        for task in claimed.started:
            self._identities.remember(task.snapshot)
        return claimed

    async def histories(self, task_ids: Collection[str]) -> dict[str, list[Transition]]:
        return await self._queue.histories(task_ids)

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        return await self._queue.trace_carriers(task_ids)

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        return await self._queue.release_claim(task_id, owner, expect_version)

    async def wait_queue_hint(self) -> None:
        self._check_open()
        await self.open()
        with translating("waiting for an enqueue notification", self._scrub):
            await self._queue.wait_hint()

    async def wait_end_hint(self) -> None:
        self._check_open()
        await self.open()
        with translating("waiting for a task-end notification", self._scrub):
            await self._end_listener.wait()
