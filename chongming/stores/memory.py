"""The in-memory store: the reference the store contract is written against.

Every method is ``async`` to honour the port, but none does I/O or awaits:
each call is atomic with respect to the event loop, which is what makes this
store the oracle for the SQL backends. It keeps what an SQL store would give
back: datetimes in UTC, and payloads (args, kwargs, result) in their JSON
form (:func:`~chongming.state.payload.json_form`: a tuple becomes a list, an
int key a string), so every store answers the same for the same input. Naive
datetimes are refused, as by every store.

The store clock (command leases and node leases) is injectable so tests can
move time: ``InMemoryTaskStore(clock=fake.now)``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming.errors import (
    ConfigurationError,
    DuplicateTaskId,
    FactConflict,
    IdempotencyConflict,
    NodeConflict,
    StoreClosed,
    TaskNotFound,
    UnknownClusterLimit,
    VersionConflict,
)
from chongming.state.machine import apply_transition
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_limit, json_form
from chongming.state.query import TaskQuery
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.state.status import ACTIVE_STATUSES, TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore, count_key
from chongming.stores.checks import (
    check_command,
    check_limit_arg,
    check_made,
    check_node,
    check_outcome,
    check_time,
    check_transitions,
    check_ttl,
)
from chongming.stores.codec import encode_progress
from chongming.stores.durable import (
    Commit,
    CommitFailed,
    DurableRun,
    EffectState,
    Fact,
    StaleEpoch,
    StepRecord,
    check_begin,
    check_effect,
    check_fact,
    check_step,
    same_fact_value,
)
from chongming.stores.limits import (
    ClusterLimit,
    check_capacity,
    check_lease,
    check_limit_name,
    granted_slots,
)
from chongming.stores.nodes import (
    Command,
    CommandRecord,
    CommandState,
    NodeInfo,
    NodeRecord,
    TaskCount,
)
from chongming.stores.queue import (
    ClaimedTask,
    Enqueued,
    Serves,
    check_claim,
    check_enqueued,
    check_trace_carrier,
    input_digest,
)
from chongming.stores.stored import as_stored, utc_transition
from chongming.stores.writes import WRITTEN, StateWrite, WriteOutcome, WriteResult

__all__ = ["InMemoryTaskStore"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


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
        self._keys: dict[str, tuple[str, str]] = {}  # idempotency key -> (task id, digest)
        self._carriers: dict[str, dict[str, str]] = {}  # task id -> its enqueue's trace carrier
        self._history: dict[str, dict[int, Transition]] = {}
        self._nodes: dict[str, NodeRecord] = {}
        self._commands: dict[str, Command] = {}
        self._outcomes: dict[str, tuple[str | None, datetime]] = {}
        self._cluster_limits: dict[str, int] = {}
        self._slots: dict[tuple[str, str], tuple[str, int]] = {}  # (limit, owner) -> (inc, held)
        self._runs: dict[str, DurableRun] = {}
        self._steps: dict[str, dict[tuple[str, int], StepRecord]] = {}
        self._facts: dict[str, dict[str, Fact]] = {}
        self._effects: dict[tuple[str, str], tuple[bool, Any]] = {}  # -> (done, result)
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
        stored = as_stored(snapshot, self._limit)
        check_transitions(transitions)
        if snapshot.task_id in self._tasks:
            raise DuplicateTaskId(snapshot.task_id)
        self._tasks[snapshot.task_id] = stored
        self._append(transitions)

    async def enqueue(
        self,
        snapshot: TaskSnapshot,
        transitions: Sequence[Transition] = (),
        *,
        connection: object | None = None,
        trace_carrier: Mapping[str, str] | None = None,
    ) -> Enqueued:
        self._check_open()
        if connection is not None:
            raise ConfigurationError(
                "the in-memory store has no transaction to join; enqueue without connection="
            )
        check_enqueued(snapshot)
        stored = as_stored(snapshot, self._limit)
        check_transitions(transitions)
        carrier = check_trace_carrier(trace_carrier)
        key = snapshot.idempotency_key
        digest = input_digest(stored)
        if key is not None and key in self._keys:
            task_id, known = self._keys[key]
            if known != digest:
                raise IdempotencyConflict(key, task_id)
            if task_id in self._tasks:
                return Enqueued(snapshot=self._tasks[task_id], created=False)
        if snapshot.task_id in self._tasks:
            raise DuplicateTaskId(snapshot.task_id)
        self._tasks[snapshot.task_id] = stored
        self._append(transitions)
        if key is not None:
            self._keys[key] = (snapshot.task_id, digest)
        if carrier is not None:
            self._carriers[snapshot.task_id] = carrier
        return Enqueued(snapshot=stored, created=True)

    async def trace_carriers(self, task_ids: Collection[str]) -> dict[str, dict[str, str]]:
        self._check_open()
        carriers = self._carriers
        return {i: dict(carriers[i]) for i in task_ids if i in carriers}

    async def claim(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
    ) -> list[TaskSnapshot]:
        self._check_open()
        check_claim(owner, serves, buckets, limit, exclude_tags)
        now = self._now()
        chosen = None if buckets is None else frozenset(buckets)
        excluded = frozenset(exclude_tags)

        def claimable(task: TaskSnapshot) -> bool:
            if task.status is not TaskStatus.QUEUED or task.owner is not None:
                return False
            if task.bucket is not None and chosen is not None and task.bucket not in chosen:
                return False
            if task.not_before is not None and task.not_before > now:
                return False
            if not excluded.isdisjoint(task.tags):
                return False
            versions = serves.get(task.name)
            return versions is not None and (task.version is None or task.version in versions)

        def order(task: TaskSnapshot) -> tuple[int, datetime, str]:
            return (-task.priority, task.queued_at or task.created_at, task.task_id)

        taken = sorted(filter(claimable, self._tasks.values()), key=order)[:limit]
        claimed = []
        for task in taken:
            mine = dataclasses.replace(task, owner=owner)
            self._tasks[task.task_id] = mine
            claimed.append(mine)
        return claimed

    async def claim_started(
        self,
        owner: str,
        *,
        serves: Serves,
        buckets: Collection[int] | None = None,
        limit: int = 1,
        exclude_tags: Collection[str] = (),
        at: datetime,
    ) -> list[ClaimedTask]:
        at = check_time(at, "at").astimezone(UTC)
        claimed = await self.claim(
            owner, serves=serves, buckets=buckets, limit=limit, exclude_tags=exclude_tags
        )
        started = []
        for task in claimed:  # nothing awaited since the claim took them: one atomic step
            queued_by = self._history[task.task_id].get(task.status_version)
            moved, transition = apply_transition(
                task,
                TaskStatus.STARTING,
                trigger=Trigger.DISPATCH,
                at=at,
                queued_by=None if queued_by is None else queued_by.trigger,
            )
            self._tasks[task.task_id] = moved
            self._append([transition])
            versions = self._history[task.task_id]
            history = tuple(versions[v] for v in sorted(versions))
            started.append(ClaimedTask(snapshot=moved, history=history))
        return started

    async def release_claim(self, task_id: str, owner: str, expect_version: int) -> bool:
        self._check_open()
        task = self._tasks.get(task_id)
        if (
            task is None
            or task.owner != owner
            or task.status is not TaskStatus.QUEUED
            or task.status_version != expect_version
        ):
            return False
        self._tasks[task_id] = dataclasses.replace(task, owner=None)
        return True

    async def save(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        self._check_open()
        stored = as_stored(snapshot, self._limit)
        check_transitions(transitions)
        current = self._tasks.get(snapshot.task_id)
        if current is None:
            raise TaskNotFound(snapshot.task_id)
        if current.status_version != expect_version:
            raise VersionConflict(snapshot.task_id, expect_version, current.status_version)
        self._tasks[snapshot.task_id] = stored
        self._append(transitions)

    async def apply_writes(self, writes: Sequence[StateWrite]) -> list[WriteResult]:
        """Trusted writes are stored as made (their records are in stored form already)."""
        if self._closed:
            raise StoreClosed("InMemoryTaskStore")
        tasks = self._tasks
        results: list[WriteResult] = []
        for write in writes:
            if not write.trusted:
                results.extend(await super().apply_writes([write]))
                continue
            snapshot = write.snapshot
            task_id = snapshot.task_id
            current = tasks.get(task_id)
            expect = write.expect_version
            if expect is None:
                if current is not None:
                    version = snapshot.status_version
                    results.append(await self._resent(write, version, _DUPLICATE))
                    continue
                check_made(snapshot)
            elif current is None:
                results.append(_NOT_FOUND)
                continue
            elif current.status_version != expect:
                version = current.status_version
                results.append(await self._resent(write, version, _CONFLICT))
                continue
            # in_stored_form(snapshot), inline: the runtime stamps UTC and keeps JSON forms.
            s = snapshot
            if not (
                s.created_at.tzinfo is UTC
                and s.updated_at.tzinfo is UTC
                and (s.queued_at is None or s.queued_at.tzinfo is UTC)
                and (s.started_at is None or s.started_at.tzinfo is UTC)
                and (s.finished_at is None or s.finished_at.tzinfo is UTC)
                and (s.last_heartbeat_at is None or s.last_heartbeat_at.tzinfo is UTC)
                and type(s.args) is tuple
                and type(s.kwargs) is dict
            ):
                s = as_stored(snapshot, None)
            tasks[task_id] = s
            versions = self._history.get(task_id)
            if versions is None:
                versions = self._history[task_id] = {}
            for transition in write.transitions:
                if transition.version not in versions:
                    at_utc = transition.at.tzinfo is UTC
                    versions[transition.version] = (
                        transition if at_utc else utc_transition(transition)
                    )
            results.append(_WRITTEN)
        return results

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
            versions.setdefault(transition.version, utc_transition(transition))

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
        owner: str | None = None,
    ) -> None:
        self._check_open()
        encode_progress(progress, self._limit)
        if heartbeat is not None:
            check_time(heartbeat, "heartbeat")
        current = self._tasks.get(task_id)
        if current is None or (progress is None and heartbeat is None):
            return
        if owner is not None and current.owner != owner:
            return  # taken over: a fenced-off attempt writes nothing
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
            if c.command_id not in self._outcomes
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
        if command is None or command_id in self._outcomes:
            return None
        return command if command.claimed_by == owner else None

    async def complete_command(
        self, command_id: str, owner: str, outcome: str | None = None
    ) -> bool:
        self._check_open()
        check_outcome(outcome)
        command = self._held(command_id, owner)
        if command is None:
            return False
        self._outcomes[command_id] = (outcome, self._now())
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

    async def command_records(
        self, *, task_id: str | None = None, limit: int = 100
    ) -> list[CommandRecord]:
        self._check_open()
        check_limit_arg(limit)
        now = self._now()
        found = [c for c in self._commands.values() if task_id is None or c.task_id == task_id]
        found.sort(key=lambda c: (c.created_at, c.command_id), reverse=True)
        records = []
        for command in found[:limit]:
            done = self._outcomes.get(command.command_id)
            if done is not None:
                records.append(
                    CommandRecord(
                        command=command,
                        state=CommandState.DONE,
                        outcome=done[0],
                        completed_at=done[1],
                    )
                )
                continue
            claimed = (
                command.claimed_by is not None
                and command.lease_expires_at is not None
                and command.lease_expires_at > now
            )
            state = CommandState.CLAIMED if claimed else CommandState.PENDING
            records.append(CommandRecord(command=command, state=state))
        return records

    # -- nodes -----------------------------------------------------------------

    async def register_node(self, info: NodeInfo, *, ttl_seconds: float) -> NodeRecord:
        self._check_open()
        check_node(info)
        ttl = check_ttl(ttl_seconds)
        now = self._now()
        current = self._nodes.get(info.owner)
        started = now
        if current is not None:
            same = current.info.incarnation == info.incarnation
            if not same and current.lease_expires_at > now:
                raise NodeConflict(info.owner, current.info.host, current.info.pid)
            if same:
                started = current.started_at
        record = NodeRecord(
            info=info,
            started_at=started,
            renewed_at=now,
            lease_expires_at=now + timedelta(seconds=ttl),
            live=True,
        )
        self._nodes[info.owner] = record
        return record

    def _own_node(self, owner: str, incarnation: str) -> NodeRecord | None:
        current = self._nodes.get(owner)
        if current is None or current.info.incarnation != incarnation:
            return None
        return current

    async def renew_node(self, owner: str, incarnation: str, *, ttl_seconds: float) -> bool:
        self._check_open()
        ttl = check_ttl(ttl_seconds)
        current = self._own_node(owner, incarnation)
        if current is None:
            return False
        now = self._now()
        self._nodes[owner] = dataclasses.replace(
            current, renewed_at=now, lease_expires_at=now + timedelta(seconds=ttl)
        )
        return True

    async def release_node(self, owner: str, incarnation: str) -> None:
        self._check_open()
        current = self._own_node(owner, incarnation)
        if current is not None:
            self._nodes[owner] = dataclasses.replace(current, lease_expires_at=self._now())

    async def nodes(self) -> list[NodeRecord]:
        self._check_open()
        now = self._now()
        return [
            dataclasses.replace(record, live=record.lease_expires_at > now)
            for _, record in sorted(self._nodes.items())
        ]

    # -- cluster-wide limits ---------------------------------------------------------

    async def declare_cluster_limit(self, name: str, capacity: int) -> int:
        self._check_open()
        return self._cluster_limits.setdefault(check_limit_name(name), check_capacity(capacity))

    async def set_cluster_limit(self, name: str, capacity: int) -> None:
        self._check_open()
        self._cluster_limits[check_limit_name(name)] = check_capacity(capacity)

    def _holds(self, owner: str, incarnation: str, now: datetime) -> bool:
        node = self._own_node(owner, incarnation)
        return node is not None and node.lease_expires_at > now

    async def lease_cluster_slots(
        self, name: str, owner: str, incarnation: str, *, want: int, keep: int
    ) -> int:
        self._check_open()
        check_lease(name, owner, incarnation, want, keep)
        if name not in self._cluster_limits:
            raise UnknownClusterLimit(name)
        now = self._now()
        others = 0
        for (limit, holder), (inc, count) in list(self._slots.items()):
            if limit != name:
                continue
            if not self._holds(holder, inc, now):
                del self._slots[limit, holder]
            elif holder != owner:
                others += count
        held = granted_slots(
            capacity=self._cluster_limits[name],
            held_by_others=others,
            want=want,
            keep=keep,
            live=self._holds(owner, incarnation, now),
        )
        if held:
            self._slots[name, owner] = (incarnation, held)
        else:
            self._slots.pop((name, owner), None)
        return held

    async def cluster_limits(self) -> list[ClusterLimit]:
        self._check_open()
        now = self._now()
        holders: dict[str, dict[str, int]] = {}
        for (limit, holder), (inc, count) in sorted(self._slots.items()):
            if self._holds(holder, inc, now):
                holders.setdefault(limit, {})[holder] = count
        return [
            ClusterLimit(name=name, capacity=capacity, holders=holders.get(name, {}))
            for name, capacity in sorted(self._cluster_limits.items())
        ]

    # -- durable execution -----------------------------------------------------------

    async def begin_durable_attempt(self, task_id: str, owner: str, *, max_resumes: int) -> int:
        self._check_open()
        check_begin(task_id, owner, max_resumes)
        task = self._tasks.get(task_id)
        if task is None or task.status.value not in ("starting", "running") or task.owner != owner:
            found = (
                "no such task" if task is None else f"it is {task.status}, owned by {task.owner!r}"
            )
            raise StaleEpoch(task_id, 0, f"an attempt of {owner!r} cannot start ({found})")
        run = self._runs.get(task_id)
        epoch = 1 if run is None else run.epoch + 1
        self._runs[task_id] = DurableRun(task_id=task_id, epoch=epoch, max_resumes=max_resumes)
        return epoch

    async def durable_runs(self, task_ids: Collection[str]) -> dict[str, DurableRun]:
        self._check_open()
        return {task_id: self._runs[task_id] for task_id in task_ids if task_id in self._runs}

    async def record_step(self, task_id: str, epoch: int, step: StepRecord) -> StepRecord:
        self._check_open()
        checked = check_step(task_id, epoch, step, self._limit)
        self._fence(task_id, epoch)
        steps = self._steps.setdefault(task_id, {})
        key = (checked.name, checked.occurrence)
        if key not in steps:
            steps[key] = dataclasses.replace(checked, seq=len(steps) + 1, epoch=epoch)
        return steps[key]

    async def steps(self, task_id: str) -> list[StepRecord]:
        self._check_open()
        return sorted(self._steps.get(task_id, {}).values(), key=lambda step: step.seq)

    async def put_fact(self, fact: Fact) -> bool:
        self._check_open()
        checked = check_fact(fact, self._limit)
        if checked.task_id not in self._tasks:
            raise TaskNotFound(checked.task_id)
        facts = self._facts.setdefault(checked.task_id, {})
        found = facts.get(checked.name)
        if found is not None:
            if not same_fact_value(found.payload, checked.payload):
                raise FactConflict(checked.task_id, checked.name)
            return False
        facts[checked.name] = checked
        self._wake(checked.task_id, checked.name)
        return True

    async def wake_for_fact(self, task_id: str, name: str) -> bool:
        self._check_open()
        return self._wake(task_id, name)

    async def store_time(self) -> datetime:
        self._check_open()
        return self._now()

    def _wake(self, task_id: str, name: str) -> bool:
        task = self._tasks.get(task_id)
        if (
            task is None
            or task.status is not TaskStatus.QUEUED
            or task.owner is not None
            or task.not_before is None
            or name not in self._facts.get(task_id, {})
        ):
            return False
        steps = self._steps.get(task_id, {})
        deadlines = sum(1 for step_name, _ in steps if step_name == f"fact:{name}:deadline")
        decided = sum(1 for step_name, _ in steps if step_name == f"fact:{name}")
        if deadlines <= decided:
            return False
        self._tasks[task_id] = dataclasses.replace(task, not_before=None)
        return True

    async def get_fact(self, task_id: str, name: str) -> Fact | None:
        self._check_open()
        return self._facts.get(task_id, {}).get(name)

    async def facts(self, task_id: str) -> list[Fact]:
        self._check_open()
        return [fact for _, fact in sorted(self._facts.get(task_id, {}).items())]

    def _fence(self, task_id: str, epoch: int) -> None:
        run, task = self._runs.get(task_id), self._tasks.get(task_id)
        if run is None or task is None:
            raise StaleEpoch(task_id, epoch, "the task has no durable run")
        if run.epoch != epoch:
            raise StaleEpoch(task_id, epoch, f"epoch {run.epoch} holds it now")
        if not task.status.holds_carrier:
            raise StaleEpoch(task_id, epoch, f"the task is {task.status} (no attempt holds it)")

    async def begin_effect(self, task_id: str, epoch: int, op_key: str) -> EffectState:
        self._check_open()
        check_effect(task_id, epoch, op_key)
        self._fence(task_id, epoch)
        found = self._effects.get((task_id, op_key))
        if found is not None and found[0]:
            return EffectState(done=True, resumed=False, result=found[1])
        self._effects[task_id, op_key] = (False, None)
        return EffectState(done=False, resumed=found is not None)

    async def finish_effect(
        self, task_id: str, epoch: int, op_key: str, result: Any, commit: Commit | None
    ) -> Any:
        """``commit`` gets ``None`` for a connection: this store has no database."""
        self._check_open()
        check_effect(task_id, epoch, op_key)
        value = json_form(result, f"the result of operation {op_key!r}", self._limit)
        self._fence(task_id, epoch)
        found = self._effects.get((task_id, op_key))
        if found is not None and found[0]:
            return found[1]
        if commit is not None:
            try:
                outcome = commit(None, value)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as error:
                raise CommitFailed(op_key, error) from error
        self._effects[task_id, op_key] = (True, value)
        return value

    # -- counts ----------------------------------------------------------------

    async def task_counts(self, *, active_only: bool = False) -> list[TaskCount]:
        self._check_open()
        counter = Counter(
            (s.status, s.bucket, s.owner)
            for s in self._tasks.values()
            if not active_only or s.status in ACTIVE_STATUSES
        )
        counts = [
            TaskCount(status=status, bucket=bucket, owner=owner, count=count)
            for (status, bucket, owner), count in counter.items()
        ]
        counts.sort(key=count_key)
        return counts


_WRITTEN = WRITTEN
_CONFLICT = WriteResult(outcome=WriteOutcome.CONFLICT)
_DUPLICATE = WriteResult(outcome=WriteOutcome.DUPLICATE)
_NOT_FOUND = WriteResult(outcome=WriteOutcome.NOT_FOUND)
