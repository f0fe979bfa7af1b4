"""Helpers and the hook-bearing base class of the contract suite."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

from chongming.state.machine import apply_transition
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.stores.nodes import Command, CommandKind, NodeInfo

__all__ = ["HOSTILE_STRINGS", "ContractBase", "make_snapshot", "next_step"]

_S = TaskStatus
_E = TypeVar("_E", bound=BaseException)
_T = TypeVar("_T")

T0 = datetime(2026, 10, 2, 8, 0, 0, 123456, tzinfo=UTC)

#: Strings that break naive SQL, LIKE patterns, terminals or encoders.
HOSTILE_STRINGS: tuple[str, ...] = (
    "x'); drop table t; --",
    'Robert"); DROP TABLE tasks;--',
    'it\'s "quoted" `twice`',
    "100%",
    "a_b",
    "back\\slash\\\\n",
    "\u202eevil.exe\u202c",
    "👩‍👩‍👧‍👦 family",
    "重明鸟 任务",
    " leading and trailing spaces ",
)

_PATH = (_S.QUEUED, _S.STARTING, _S.RUNNING, _S.SUCCEEDED)


def make_snapshot(task_id: str, **fields: Any) -> TaskSnapshot:
    """A pending task at version 0 created at ``T0``; ``fields`` override anything."""
    base: dict[str, Any] = {
        "task_id": task_id,
        "name": "extract",
        "label": f"label of {task_id}",
        "status": _S.PENDING,
        "status_version": 0,
        "attempt": 0,
        "max_attempts": 3,
        "created_at": T0,
        "updated_at": T0,
    }
    base.update(fields)
    return TaskSnapshot(**base)


def next_step(
    snapshot: TaskSnapshot, to: TaskStatus, *, trigger: str = "test:step", **fields: Any
) -> tuple[TaskSnapshot, Transition]:
    """The snapshot after one legal move, and the transition that records it."""
    actor = str(fields.pop("actor", "system"))
    reason = fields.pop("reason", None)
    at = snapshot.updated_at + timedelta(seconds=1)
    updated, transition = apply_transition(
        snapshot, to, trigger=trigger, at=at, actor=actor, reason=reason
    )
    if fields:
        updated = dataclasses.replace(updated, **fields)
    return updated, transition


async def _raises(kind: type[_E], call: Awaitable[object]) -> _E:
    try:
        await call
    except kind as error:
        return error
    raise AssertionError(f"expected {kind.__name__}, nothing was raised")


def _order(snapshots: list[TaskSnapshot]) -> list[TaskSnapshot]:
    return sorted(snapshots, key=lambda s: (s.created_at, s.task_id))


def _command(command_id: str, task_id: str = "t", **fields: Any) -> Command:
    base: dict[str, Any] = {
        "command_id": command_id,
        "task_id": task_id,
        "kind": CommandKind.STOP,
        "created_at": T0,
    }
    base.update(fields)
    return Command(**base)


def _node(owner: str, incarnation: str = "inc-1", **fields: Any) -> NodeInfo:
    base: dict[str, Any] = {
        "owner": owner,
        "incarnation": incarnation,
        "host": "host-1",
        "pid": 4242,
        "version": "1.0",
        "num_buckets": 64,
    }
    base.update(fields)
    return NodeInfo(**base)


def _fill(size: int) -> str:
    """Hostile text whose JSON encoding stays within ``size`` UTF-8 bytes."""
    unit = "".join(HOSTILE_STRINGS)
    text = unit * (size // len(json.dumps(unit, ensure_ascii=False).encode()) + 1)
    while len(json.dumps(text, ensure_ascii=False).encode()) > size:
        text = text[: len(text) * 9 // 10]
    return text


class ContractBase:
    """Hooks and plumbing shared by the contract's parts; see the package docstring."""

    lease_seconds: ClassVar[float] = 0.2
    long_lease_seconds: ClassVar[float] = 60.0
    wait_timeout: ClassVar[float] = 10.0
    poll_interval: ClassVar[float] = 0.02
    #: The payload cap the store under test enforces (the default of every store).
    max_payload_bytes: ClassVar[int] = DEFAULT_MAX_PAYLOAD_BYTES

    # -- hooks ---------------------------------------------------------------

    async def make_store(self) -> TaskStore:
        raise NotImplementedError("subclass StoreContract and implement make_store()")

    async def release_store(self, store: TaskStore) -> None:
        await store.close()

    async def advance_clock(self, seconds: float) -> None:
        """Real clocks move by themselves; fake clocks override this."""

    # -- plumbing ------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _store(self) -> AsyncIterator[TaskStore]:
        made: Any = self.make_store()
        store: TaskStore = await made if inspect.isawaitable(made) else made
        try:
            yield store
        finally:
            await self.release_store(store)

    async def _eventually(self, probe: Callable[[], Awaitable[_T]], what: str) -> _T:
        """Let a short lease run out, then poll ``probe`` until it is truthy (bounded)."""
        await self.advance_clock(self.lease_seconds + 1.0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lease_seconds + self.wait_timeout
        while True:
            value = await probe()
            if value:
                return value
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(self.poll_interval)

    async def _trajectory(self, store: TaskStore, task_id: str) -> TaskSnapshot:
        snapshot = make_snapshot(task_id)
        await store.create(snapshot)
        for to in _PATH:
            new, transition = next_step(snapshot, to)
            await store.save(new, expect_version=snapshot.status_version, transitions=[transition])
            snapshot = new
        return snapshot
