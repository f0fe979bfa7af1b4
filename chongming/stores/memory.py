"""The in-memory store: the reference the store contract is written against.

Every method is ``async`` to honour the port, but none does I/O or awaits:
each call is atomic with respect to the event loop, which is what makes this
store the oracle for the SQL backends. It keeps what an SQL store would give
back: datetimes in UTC, and payloads (args, kwargs, result) in their JSON
form (:func:`~chongming.state.payload.json_form`: a tuple becomes a list, an
int key a string), so every store answers the same for the same input. Naive
datetimes are refused, as by every store.

The store clock (for command and supervisor leases) is injectable so tests can
move time: ``InMemoryTaskStore(clock=fake.now)``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta

from chongming.errors import DuplicateTaskId, StoreClosed, TaskNotFound, VersionConflict
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit, json_form
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.stores.base import Command, ExpiredLease, TaskStore
from chongming.stores.checks import (
    check_command,
    check_snapshot_text,
    check_time,
    check_transitions,
)
from chongming.stores.codec import encode_failure, encode_progress

__all__ = ["InMemoryTaskStore"]

_TIME_FIELDS = (
    "created_at",
    "updated_at",
    "queued_at",
    "started_at",
    "finished_at",
    "last_heartbeat_at",
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _as_stored(snapshot: TaskSnapshot, limit: int | None) -> TaskSnapshot:
    """Checked, with UTC datetimes and JSON-form payloads: what an SQL store reads back."""
    check_snapshot_text(snapshot)
    encode_progress(snapshot.progress, limit)  # the same checks and cap as the SQL stores
    encode_failure(snapshot.failure, limit)
    changes: dict[str, object] = {}
    for name in _TIME_FIELDS:
        value = getattr(snapshot, name)
        if value is not None and value.tzinfo is not UTC:
            changes[name] = value.astimezone(UTC)
    result = snapshot.result
    if result is not None:
        changes["result"] = json_form(result, "result", limit)
    if snapshot.args:
        changes["args"] = tuple(json_form(list(snapshot.args), "args", limit))
    elif type(snapshot.args) is not tuple:
        changes["args"] = ()
    if snapshot.kwargs:
        changes["kwargs"] = json_form(dict(snapshot.kwargs), "kwargs", limit)
    elif type(snapshot.kwargs) is not dict:
        changes["kwargs"] = {}
    return dataclasses.replace(snapshot, **changes) if changes else snapshot  # type: ignore[arg-type]


def _utc_transition(transition: Transition) -> Transition:
    if transition.at.tzinfo is UTC:
        return transition
    return dataclasses.replace(transition, at=transition.at.astimezone(UTC))


@dataclasses.dataclass(frozen=True, slots=True)
class _Lease:
    owner: str
    expires_at: datetime


class InMemoryTaskStore(TaskStore):
    """A dict-backed :class:`TaskStore` for tests, demos and single-process use.

    ``clock`` returns the store's "now" (aware, UTC) for leases; it defaults to
    the wall clock.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = _utc_now,
        max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self._clock = clock
        self._limit = check_limit(max_payload_bytes)
        self._tasks: dict[str, TaskSnapshot] = {}
        self._history: dict[str, dict[int, Transition]] = {}
        self._leases: dict[str, _Lease] = {}
        self._commands: dict[str, Command] = {}
        self._finished_commands: set[str] = set()
        self._hint: asyncio.Event | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._tasks)} tasks"
        return f"<InMemoryTaskStore {state}>"

    # -- lifecycle -----------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("InMemoryTaskStore")

    async def open(self) -> None:
        self._check_open()

    async def close(self) -> None:
        self._closed = True
        if self._hint is not None:
            # Wake hint waiters so they poll, see StoreClosed and stop.
            self._hint.set()

    def _now(self) -> datetime:
        return _utc(self._clock())

    # -- snapshots -----------------------------------------------------------

    async def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        self._check_open()
        stored = _as_stored(snapshot, self._limit)
        check_transitions(transitions)
        if snapshot.task_id in self._tasks:
            raise DuplicateTaskId(snapshot.task_id)
        self._tasks[snapshot.task_id] = stored
        self._append(transitions)

    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        self._check_open()
        stored = _as_stored(snapshot, self._limit)
        check_transitions(transitions)
        current = self._tasks.get(snapshot.task_id)
        if current is None:
            raise TaskNotFound(snapshot.task_id)
        if current.status_version != expect_version:
            raise VersionConflict(snapshot.task_id, expect_version, current.status_version)
        self._tasks[snapshot.task_id] = stored
        self._append(transitions)

    async def get(self, task_id: str) -> TaskSnapshot | None:
        self._check_open()
        return self._tasks.get(task_id)

    async def query(self, query: TaskQuery) -> list[TaskSnapshot]:
        self._check_open()
        found = sorted(
            (s for s in self._tasks.values() if query.matches(s)),
            key=lambda s: (s.created_at, s.task_id),
        )
        return found if query.limit is None else found[: query.limit]

    # -- history -------------------------------------------------------------

    def _append(self, transitions: Sequence[Transition]) -> None:
        for transition in transitions:
            versions = self._history.setdefault(transition.task_id, {})
            versions.setdefault(transition.version, _utc_transition(transition))

    async def append(self, transitions: Sequence[Transition]) -> None:
        self._check_open()
        check_transitions(transitions)
        self._append(transitions)

    async def history(self, task_id: str) -> list[Transition]:
        self._check_open()
        versions = self._history.get(task_id, {})
        return [versions[v] for v in sorted(versions)]

    # -- hot path ------------------------------------------------------------

    async def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat: datetime | None = None,
    ) -> None:
        self._check_open()
        encode_progress(progress, self._limit)
        if heartbeat is not None:
            check_time(heartbeat, "heartbeat")
        current = self._tasks.get(task_id)
        if current is None or (progress is None and heartbeat is None):
            return
        self._tasks[task_id] = dataclasses.replace(
            current,
            progress=current.progress if progress is None else progress,
            last_heartbeat_at=current.last_heartbeat_at if heartbeat is None else _utc(heartbeat),
        )

    # -- commands ------------------------------------------------------------

    async def submit_command(self, command: Command) -> None:
        self._check_open()
        check_command(command)
        if command.command_id in self._commands:
            return
        self._commands[command.command_id] = dataclasses.replace(
            command, created_at=_utc(command.created_at), claimed_by=None, lease_expires_at=None
        )
        if self._hint is not None:
            self._hint.set()
            self._hint = None

    async def claim_commands(
        self, owner: str, *, lease_seconds: float, limit: int = 100
    ) -> list[Command]:
        self._check_open()
        now = self._now()
        expires = now + timedelta(seconds=lease_seconds)
        free = [
            c
            for c in self._commands.values()
            if c.command_id not in self._finished_commands
            and (c.target_owner is None or c.target_owner == owner)
            and (c.claimed_by is None or c.lease_expires_at is None or c.lease_expires_at <= now)
        ]
        free.sort(key=lambda c: (c.created_at, c.command_id))
        claimed = []
        for command in free[:limit]:
            updated = dataclasses.replace(command, claimed_by=owner, lease_expires_at=expires)
            self._commands[command.command_id] = updated
            claimed.append(updated)
        return claimed

    def _held(self, command_id: str, owner: str) -> Command | None:
        command = self._commands.get(command_id)
        if command is None or command_id in self._finished_commands:
            return None
        return command if command.claimed_by == owner else None

    async def complete_command(self, command_id: str, owner: str) -> bool:
        self._check_open()
        command = self._held(command_id, owner)
        if command is None:
            return False
        self._finished_commands.add(command_id)
        self._commands[command_id] = dataclasses.replace(command, lease_expires_at=None)
        return True

    async def release_command(self, command_id: str, owner: str) -> bool:
        self._check_open()
        command = self._held(command_id, owner)
        if command is None:
            return False
        self._commands[command_id] = dataclasses.replace(
            command, claimed_by=None, lease_expires_at=None
        )
        return True

    async def wait_command_hint(self) -> None:
        """Return once a command is submitted to this store (or it is closed)."""
        self._check_open()
        if self._hint is None:
            self._hint = asyncio.Event()
        await self._hint.wait()
        self._check_open()

    # -- supervisor leases ---------------------------------------------------

    async def renew_leases(
        self, owner: str, task_ids: Collection[str], *, ttl_seconds: float
    ) -> None:
        self._check_open()
        lease = _Lease(owner, self._now() + timedelta(seconds=ttl_seconds))
        for task_id in task_ids:
            if task_id in self._tasks:
                self._leases[task_id] = lease

    async def expired_leases(self, *, buckets: Collection[int] | None = None) -> list[ExpiredLease]:
        self._check_open()
        now = self._now()
        expired = []
        for snapshot in self._tasks.values():
            if snapshot.is_terminal:
                continue
            if buckets is not None and snapshot.bucket not in buckets:
                continue
            lease = self._leases.get(snapshot.task_id)
            if lease is not None and lease.expires_at > now:
                continue
            expired.append(
                ExpiredLease(
                    snapshot=snapshot,
                    lease_owner=None if lease is None else lease.owner,
                    lease_expires_at=None if lease is None else lease.expires_at,
                )
            )
        expired.sort(key=lambda e: (e.snapshot.created_at, e.snapshot.task_id))
        return expired
