"""The behaviour every :class:`~chongming.stores.base.TaskStore` must show.

Subclass :class:`StoreContract` in your test suite and implement
:meth:`StoreContract.make_store`; every ``async def test_*`` coroutine then
runs against your backend (pytest with pytest-asyncio in ``asyncio_mode =
"auto"`` collects them from a ``Test*`` subclass)::

    from chongming.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        async def make_store(self) -> TaskStore:
            return MyStore(...)          # fresh and empty for every test

Importing this module never imports pytest: the checks are plain ``assert``
statements, so any async test runner can drive them.

Hooks (a stable API):

``async def make_store(self) -> TaskStore`` (required)
    Return a new store over an **empty** database, not yet opened (the tests
    rely on the implicit open of the first operation, and some call ``open()``
    or ``async with`` themselves). A sync ``def`` returning the store also
    works.
``async def release_store(self, store) -> None``
    Called after each test, even a failed one. The default closes the store;
    override it to also drop a per-test schema or assert that no connection
    leaked (call ``super().release_store(store)`` first).
``async def advance_clock(self, seconds) -> None``
    Move the store's clock forward. Lease tests call it, then poll the store
    with a bounded deadline until the lease has expired. The default does
    nothing: a store whose clock is real (SQLite's wall clock, PostgreSQL's
    ``now()``) simply lets real time pass. Such backends keep the default and,
    if their clock is coarse or remote, raise :attr:`lease_seconds` (short
    TTLs keep the suite fast) and :attr:`wait_timeout` (the polling bound).

Class attributes: :attr:`lease_seconds` (the short TTL used where a lease
must run out, 0.2 s), :attr:`long_lease_seconds` (a TTL that never runs out
during a test, 60 s), :attr:`wait_timeout` and :attr:`poll_interval`.

What is *not* specified (and not tested): ``append`` of transitions for a
task that was never created; whether ``complete_command`` succeeds for a
holder whose lease expired but was not claimed by anyone else. NUL and lone
surrogates never reach a store (the API rejects them), so they are not
covered here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar, TypeVar

from chongming.errors import (
    DuplicateTaskId,
    PayloadError,
    StoreClosed,
    TaskNotFound,
    VersionConflict,
)
from chongming.state.fold import fold_history
from chongming.state.machine import apply_transition
from chongming.state.payload import DEFAULT_MAX_PAYLOAD_BYTES
from chongming.state.query import TaskQuery
from chongming.state.records import Failure, FailureKind, Progress, TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import Command, CommandKind, TaskStore

__all__ = ["HOSTILE_STRINGS", "StoreContract", "make_snapshot", "next_step"]

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


def _fill(size: int) -> str:
    """Hostile text whose JSON encoding stays within ``size`` UTF-8 bytes."""
    unit = "".join(HOSTILE_STRINGS)
    text = unit * (size // len(json.dumps(unit, ensure_ascii=False).encode()) + 1)
    while len(json.dumps(text, ensure_ascii=False).encode()) > size:
        text = text[: len(text) * 9 // 10]
    return text


class StoreContract:
    """Behavioural tests for a :class:`TaskStore`; see the module docstring."""

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

    # -- lifecycle -----------------------------------------------------------

    async def test_fresh_store_opens_implicitly_and_is_empty(self) -> None:
        async with self._store() as store:
            assert await store.get("nope") is None
            assert await store.history("nope") == []
            assert await store.query(TaskQuery()) == []
            assert await store.claim_commands("node-a", lease_seconds=30) == []

    async def test_async_with_opens_and_closes(self) -> None:
        async with self._store() as store:
            async with store as entered:
                assert entered is store
                await store.create(make_snapshot("t"))
            await _raises(StoreClosed, store.get("t"))

    async def test_close_is_idempotent_and_every_method_then_raises(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            await store.close()
            await store.close()
            _, transition = next_step(snapshot, _S.QUEUED)
            calls: list[Callable[[], Awaitable[object]]] = [
                store.open,
                lambda: store.create(make_snapshot("u")),
                lambda: store.save(snapshot, expect_version=0),
                lambda: store.get("t"),
                lambda: store.query(TaskQuery()),
                lambda: store.append([transition]),
                lambda: store.history("t"),
                lambda: store.touch("t", heartbeat=T0),
                lambda: store.submit_command(_command("c")),
                lambda: store.claim_commands("n", lease_seconds=1),
                lambda: store.complete_command("c", "n"),
                lambda: store.release_command("c", "n"),
                lambda: store.renew_leases("n", ["t"], ttl_seconds=1),
                lambda: store.expired_leases(),
            ]
            for call in calls:
                await _raises(StoreClosed, call())

    # -- snapshots -----------------------------------------------------------

    async def test_create_then_get_round_trips_every_field(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot(
                "full",
                status=_S.RETRY_WAIT,
                status_version=7,
                attempt=2,
                bucket=7,
                bucket_key="tenant-A",
                tags=frozenset({"io", "cpu"}),
                priority=-5,
                owner="node-a",
                queued_at=T0 + timedelta(seconds=1),
                started_at=T0 + timedelta(seconds=2),
                last_heartbeat_at=T0 + timedelta(seconds=3),
                progress=Progress(done=2.5, total=6, unit="parts", message="day/part2"),
                failure=Failure(
                    kind=FailureKind.TIMEOUT_ATTEMPT,
                    message="took too long",
                    exception_type="TimeoutError",
                    retryable=True,
                ),
                result={"nested": [1, 2.5, None, True, "s"], "empty": {}},
                args=("2026-10-02", [1, 2], {"k": "v"}),
                kwargs={"limit": 10, "flag": False},
            )
            await store.create(snapshot)
            assert await store.get("full") == snapshot

    async def test_create_writes_its_first_transitions(self) -> None:
        async with self._store() as store:
            queued, transition = next_step(make_snapshot("t"), _S.QUEUED)
            await store.create(queued, [transition])
            assert await store.history("t") == [transition]
            assert await store.get("t") == queued

    async def test_duplicate_create_raises_and_writes_nothing(self) -> None:
        async with self._store() as store:
            original = make_snapshot("t", label="first")
            await store.create(original)
            other, transition = next_step(make_snapshot("t", label="second"), _S.QUEUED)
            error = await _raises(DuplicateTaskId, store.create(other, [transition]))
            assert error.task_id == "t"
            assert await store.get("t") == original
            assert await store.history("t") == []

    async def test_save_with_the_expected_version_replaces_the_snapshot(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            queued, transition = next_step(snapshot, _S.QUEUED, owner="node-a", priority=3)
            await store.save(queued, expect_version=0, transitions=[transition])
            assert await store.get("t") == queued
            assert await store.history("t") == [transition]

    async def test_stale_save_conflicts_and_writes_nothing(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            queued, first = next_step(snapshot, _S.QUEUED)
            await store.save(queued, expect_version=0, transitions=[first])
            rival, rival_transition = next_step(snapshot, _S.CANCELLED, reason="stale writer")
            error = await _raises(
                VersionConflict, store.save(rival, expect_version=0, transitions=[rival_transition])
            )
            assert (error.task_id, error.expected, error.actual) == ("t", 0, 1)
            assert await store.get("t") == queued
            assert await store.history("t") == [first]

    async def test_save_of_an_unknown_task_raises_and_writes_nothing(self) -> None:
        async with self._store() as store:
            queued, transition = next_step(make_snapshot("ghost"), _S.QUEUED)
            error = await _raises(
                TaskNotFound, store.save(queued, expect_version=0, transitions=[transition])
            )
            assert error.task_id == "ghost"
            assert isinstance(error, LookupError)
            assert await store.get("ghost") is None
            assert await store.history("ghost") == []

    async def test_concurrent_saves_of_one_version_have_exactly_one_winner(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)

            async def attempt(i: int) -> tuple[int, bool]:
                new, transition = next_step(snapshot, _S.QUEUED, owner=f"node-{i}")
                try:
                    await store.save(new, expect_version=0, transitions=[transition])
                except VersionConflict:
                    return i, False
                return i, True

            outcomes = await asyncio.gather(*(attempt(i) for i in range(40)))
            winners = [i for i, won in outcomes if won]
            assert len(winners) == 1
            stored = await store.get("t")
            assert stored is not None
            assert stored.owner == f"node-{winners[0]}"
            assert stored.status_version == 1
            assert len(await store.history("t")) == 1

    async def test_concurrent_trajectories_keep_every_history_whole(self) -> None:
        async with self._store() as store:
            ids = [f"task-{i:02d}" for i in range(25)]
            finals = await asyncio.gather(*(self._trajectory(store, i) for i in ids))
            for final in finals:
                history = await store.history(final.task_id)
                assert [t.version for t in history] == [1, 2, 3, 4]
                folded = fold_history(history)
                assert (folded.status, folded.status_version) == (_S.SUCCEEDED, 4)
                assert await store.get(final.task_id) == final

    # -- history -------------------------------------------------------------

    async def test_history_is_in_version_order_and_folds_to_the_snapshot(self) -> None:
        async with self._store() as store:
            final = await self._trajectory(store, "t")
            history = await store.history("t")
            assert [(t.from_status, t.to_status) for t in history] == [
                (_S.PENDING, _S.QUEUED),
                (_S.QUEUED, _S.STARTING),
                (_S.STARTING, _S.RUNNING),
                (_S.RUNNING, _S.SUCCEEDED),
            ]
            folded = fold_history(history)
            assert (folded.status, folded.status_version) == (final.status, final.status_version)

    async def test_append_is_idempotent_per_version_and_sorted(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            transitions = []
            for to in _PATH:
                snapshot, transition = next_step(snapshot, to)
                transitions.append(transition)
            await store.append([transitions[2], transitions[0]])
            await store.append([transitions[1], transitions[3], transitions[0]])
            impostor = dataclasses.replace(transitions[1], trigger="impostor", reason="again")
            await store.append([impostor])
            assert await store.history("t") == transitions

    async def test_save_appends_only_new_versions(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            queued, transition = next_step(snapshot, _S.QUEUED)
            await store.append([transition])
            await store.save(queued, expect_version=0, transitions=[transition])
            assert await store.history("t") == [transition]

    # -- hot path ------------------------------------------------------------

    async def test_touch_updates_progress_and_heartbeat_but_never_the_version(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t")
            await store.create(snapshot)
            progress = Progress(done=3, total=6, unit="parts", message="part 3")
            beat = T0 + timedelta(minutes=5, microseconds=7)
            await store.touch("t", progress=progress, heartbeat=beat)
            stored = await store.get("t")
            assert stored is not None
            assert (stored.progress, stored.last_heartbeat_at) == (progress, beat)
            assert stored.status_version == 0
            later = Progress(done=4, total=6)
            await store.touch("t", progress=later)
            stored = await store.get("t")
            assert stored is not None
            assert (stored.progress, stored.last_heartbeat_at) == (later, beat)
            await store.touch("t", heartbeat=beat + timedelta(seconds=1))
            stored = await store.get("t")
            assert stored is not None
            assert (stored.progress, stored.last_heartbeat_at) == (
                later,
                beat + timedelta(seconds=1),
            )
            queued, transition = next_step(stored, _S.QUEUED)
            await store.save(queued, expect_version=0, transitions=[transition])
            assert await store.get("t") == queued

    async def test_touch_of_an_unknown_task_is_ignored(self) -> None:
        async with self._store() as store:
            await store.touch("ghost", progress=Progress(done=1), heartbeat=T0)
            assert await store.get("ghost") is None
            assert await store.query(TaskQuery()) == []

    # -- queries -------------------------------------------------------------

    def _query_fixture(self) -> list[TaskSnapshot]:
        statuses = [_S.QUEUED, _S.RUNNING, _S.SUCCEEDED, _S.PAUSED, _S.LOST, _S.BLOCKED]
        tag_sets = [frozenset(), frozenset({"io"}), frozenset({"io", "cpu"}), frozenset({"%"})]
        buckets = [None, 0, 1, 7]
        names = ["extract", "crunch", "a_c", "abc"]
        owners = [None, "node-a", "node-b"]
        snapshots = []
        for i in range(24):
            snapshots.append(
                make_snapshot(
                    f"q-{23 - i:02d}",
                    status=statuses[i % len(statuses)],
                    status_version=i % 5,
                    tags=tag_sets[i % len(tag_sets)],
                    bucket=buckets[i % len(buckets)],
                    name=names[(i // 2) % len(names)],
                    owner=owners[i % len(owners)],
                    # Ties on created_at are broken by task_id; an offset must not fool the order.
                    created_at=(T0 + timedelta(seconds=i // 3)).astimezone(
                        timezone(timedelta(hours=8 if i % 2 else -5))
                    ),
                )
            )
        return snapshots

    async def test_query_filters_and_order_match_the_reference(self) -> None:
        async with self._store() as store:
            data = self._query_fixture()
            for snapshot in data:
                await store.create(snapshot)
            queries = [
                TaskQuery(),
                TaskQuery(statuses=frozenset({_S.RUNNING, _S.PAUSED})),
                TaskQuery(statuses=frozenset({_S.FAILED})),
                TaskQuery(tag="io"),
                TaskQuery(tag="%"),
                TaskQuery(tag="_"),
                TaskQuery(bucket=0),
                TaskQuery(buckets=frozenset({1, 7})),
                TaskQuery(buckets=frozenset()),
                TaskQuery(name="a_c"),
                TaskQuery(name="a%"),
                TaskQuery(owner="node-b"),
                TaskQuery(owner="node-b", tag="io", limit=2),
                TaskQuery(statuses=frozenset({_S.QUEUED, _S.LOST}), bucket=0, name="extract"),
                TaskQuery(limit=5),
                TaskQuery(limit=1000),
            ]
            for query in queries:
                expected = _order([s for s in data if query.matches(s)])[: query.limit]
                got = await store.query(query)
                assert [s.task_id for s in got] == [s.task_id for s in expected], query
                assert got == [await store.get(s.task_id) for s in expected]

    # -- commands ------------------------------------------------------------

    async def test_claim_sets_owner_and_lease(self) -> None:
        async with self._store() as store:
            command = _command("c1", reason="user asked", actor="cli")
            await store.submit_command(command)
            (claimed,) = await store.claim_commands("node-a", lease_seconds=30)
            assert claimed.claimed_by == "node-a"
            assert claimed.lease_expires_at is not None
            assert claimed.lease_expires_at.utcoffset() == timedelta(0)
            assert dataclasses.replace(claimed, claimed_by=None, lease_expires_at=None) == command

    async def test_a_leased_command_is_not_claimed_twice(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            assert (
                len(await store.claim_commands("node-a", lease_seconds=self.long_lease_seconds))
                == 1
            )
            assert await store.claim_commands("node-b", lease_seconds=30) == []
            assert await store.claim_commands("node-a", lease_seconds=30) == []

    async def test_resubmitting_a_command_id_is_a_no_op(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.submit_command(_command("c1", kind=CommandKind.PAUSE))
            claimed = await store.claim_commands("node-a", lease_seconds=30)
            assert [(c.command_id, c.kind) for c in claimed] == [("c1", CommandKind.STOP)]

    async def test_claim_is_oldest_first_and_bounded_by_limit(self) -> None:
        async with self._store() as store:
            for i in (3, 1, 4, 0, 2):
                await store.submit_command(
                    _command(f"c{i}", created_at=T0 + timedelta(milliseconds=i))
                )
            first = await store.claim_commands("node-a", lease_seconds=30, limit=2)
            rest = await store.claim_commands("node-a", lease_seconds=30, limit=10)
            assert [c.command_id for c in first] == ["c0", "c1"]
            assert [c.command_id for c in rest] == ["c2", "c3", "c4"]

    async def test_claim_honours_target_owner(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("for-b", target_owner="node-b"))
            await store.submit_command(_command("anyone", created_at=T0 + timedelta(seconds=1)))
            mine = await store.claim_commands("node-a", lease_seconds=30)
            assert [c.command_id for c in mine] == ["anyone"]
            theirs = await store.claim_commands("node-b", lease_seconds=30)
            assert [(c.command_id, c.target_owner) for c in theirs] == [("for-b", "node-b")]

    async def test_complete_needs_the_holder_and_ends_the_command(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.claim_commands("node-a", lease_seconds=30)
            assert await store.complete_command("c1", "node-b") is False
            assert await store.complete_command("unknown", "node-a") is False
            assert await store.complete_command("c1", "node-a") is True
            assert await store.complete_command("c1", "node-a") is False
            await self.advance_clock(60)
            assert await store.claim_commands("node-b", lease_seconds=30) == []

    async def test_release_hands_the_command_back_untouched(self) -> None:
        async with self._store() as store:
            command = _command("c1", target_owner=None, reason="because")
            await store.submit_command(command)
            await store.claim_commands("node-a", lease_seconds=self.long_lease_seconds)
            assert await store.release_command("c1", "node-b") is False
            assert await store.release_command("c1", "node-a") is True
            assert await store.release_command("c1", "node-a") is False
            (again,) = await store.claim_commands("node-b", lease_seconds=30)
            assert again.claimed_by == "node-b"
            assert dataclasses.replace(again, claimed_by=None, lease_expires_at=None) == command

    async def test_an_expired_command_lease_can_be_claimed_again(self) -> None:
        async with self._store() as store:
            await store.submit_command(_command("c1"))
            await store.claim_commands("node-a", lease_seconds=self.lease_seconds)

            async def claim_by_b() -> list[Command]:
                return await store.claim_commands("node-b", lease_seconds=self.long_lease_seconds)

            (reclaimed,) = await self._eventually(claim_by_b, "the command lease to expire")
            assert reclaimed.claimed_by == "node-b"
            assert await store.complete_command("c1", "node-a") is False
            assert await store.release_command("c1", "node-a") is False
            assert await store.complete_command("c1", "node-b") is True

    # -- supervisor leases ---------------------------------------------------

    async def test_never_leased_active_tasks_are_reported_terminal_never(self) -> None:
        async with self._store() as store:
            await store.create(make_snapshot("active", status=_S.RUNNING, status_version=3))
            for i, status in enumerate(sorted(_S, key=str)):
                if status.is_terminal:
                    await store.create(make_snapshot(f"done-{i}", status=status, status_version=4))
            (lease,) = await store.expired_leases()
            assert lease.snapshot == await store.get("active")
            assert (lease.lease_owner, lease.lease_expires_at) == (None, None)

    async def test_renewed_leases_expire_after_their_ttl(self) -> None:
        async with self._store() as store:
            for task_id in ("a", "b", "done"):
                status = _S.SUCCEEDED if task_id == "done" else _S.RUNNING
                await store.create(make_snapshot(task_id, status=status, status_version=4))
            await store.renew_leases("node-a", ["a", "done"], ttl_seconds=self.lease_seconds)
            await store.renew_leases("node-b", ["b"], ttl_seconds=self.long_lease_seconds)
            await store.renew_leases("node-a", ["ghost"], ttl_seconds=self.lease_seconds)
            assert await store.get("ghost") is None

            async def expired_ids() -> list[str]:
                return [lease.snapshot.task_id for lease in await store.expired_leases()]

            assert await self._eventually(expired_ids, "the lease of 'a' to expire") == ["a"]
            (lease,) = await store.expired_leases()
            assert lease.lease_owner == "node-a"
            assert lease.lease_expires_at is not None
            assert lease.lease_expires_at.utcoffset() == timedelta(0)
            await store.renew_leases("node-a", ["a"], ttl_seconds=self.long_lease_seconds)
            assert await store.expired_leases() == []

    async def test_expired_leases_filter_by_bucket(self) -> None:
        async with self._store() as store:
            for bucket in (None, 0, 1, 2):
                task_id = f"b-{bucket}"
                await store.create(make_snapshot(task_id, status=_S.QUEUED, bucket=bucket))
            found = await store.expired_leases(buckets=frozenset({0, 2}))
            assert sorted(lease.snapshot.task_id for lease in found) == ["b-0", "b-2"]
            assert await store.expired_leases(buckets=frozenset()) == []
            assert len(await store.expired_leases()) == 4

    async def test_save_never_touches_the_lease(self) -> None:
        async with self._store() as store:
            snapshot = make_snapshot("t", status=_S.QUEUED, status_version=1, owner="node-a")
            await store.create(snapshot)
            await store.renew_leases("node-a", ["t"], ttl_seconds=self.long_lease_seconds)
            starting, transition = next_step(snapshot, _S.STARTING)
            await store.save(starting, expect_version=1, transitions=[transition])
            await store.touch("t", progress=Progress(done=1), heartbeat=T0)
            assert await store.expired_leases() == []
            await store.renew_leases("node-b", ["t"], ttl_seconds=self.lease_seconds)

            async def expired() -> list[Any]:
                return await store.expired_leases()

            (lease,) = await self._eventually(expired, "the lease to expire")
            assert lease.lease_owner == "node-b"
            assert lease.snapshot.status is _S.STARTING

    # -- hostile input and encodings -----------------------------------------

    async def test_hostile_strings_round_trip_byte_identical(self) -> None:
        big = _fill(self.max_payload_bytes - 64)
        async with self._store() as store:
            for i, text in enumerate(HOSTILE_STRINGS):
                snapshot = make_snapshot(
                    text,
                    label=text,
                    name=text,
                    owner=text,
                    bucket_key=text,
                    tags=frozenset({text, "plain"}),
                    args=(text, [text], {text: text}),
                    kwargs={text: text},
                    result={"text": text},
                    progress=Progress(done=i, message=text, unit=text),
                    failure=Failure(kind=FailureKind.EXCEPTION, message=text, exception_type=text),
                    created_at=T0 + timedelta(seconds=i),
                )
                queued, transition = next_step(snapshot, _S.QUEUED, reason=text, actor=text)
                await store.create(snapshot)
                await store.save(queued, expect_version=0, transitions=[transition])
                assert await store.get(text) == queued
                assert await store.history(text) == [transition]
                await store.submit_command(_command(text, text, reason=text, actor=text))
            for text in HOSTILE_STRINGS:
                for query in (TaskQuery(name=text), TaskQuery(owner=text), TaskQuery(tag=text)):
                    assert [s.task_id for s in await store.query(query)] == [text], query
            claimed = await store.claim_commands("node-a", lease_seconds=30, limit=100)
            assert sorted(c.command_id for c in claimed) == sorted(HOSTILE_STRINGS)
            assert all(c.reason == c.task_id == c.actor == c.command_id for c in claimed)

            huge = make_snapshot("huge", args=(big,), kwargs={"big": big}, result=big)
            await store.create(huge)
            assert await store.get("huge") == huge

    async def test_payloads_over_the_cap_are_refused_and_nothing_written(self) -> None:
        cap = self.max_payload_bytes
        over = "x" * (cap + 1)
        async with self._store() as store:
            for fields in ({"result": over}, {"args": (over,)}, {"kwargs": {"k": over}}):
                error = await _raises(PayloadError, store.create(make_snapshot("big", **fields)))
                assert "limit" in str(error)
                assert await store.get("big") is None
            good = make_snapshot("big")
            await store.create(good)
            done = dataclasses.replace(good, status_version=1, result=[over])
            await _raises(PayloadError, store.save(done, expect_version=0))
            assert await store.get("big") == good

    async def test_what_no_store_can_hold_is_refused_alike_and_nothing_written(self) -> None:
        """NUL and lone surrogates: PayloadError from every store, never a driver error."""
        async with self._store() as store:
            for n, bad in enumerate(("a\x00b", "\ud800")):
                task_id = f"t{n}"
                bad_fields: list[dict[str, Any]] = [
                    {"label": bad},
                    {"owner": bad},
                    {"args": (bad,)},
                    {"result": [bad]},
                ]
                for fields in bad_fields:
                    await _raises(PayloadError, store.create(make_snapshot(task_id, **fields)))
                    assert await store.get(task_id) is None
                good = make_snapshot(task_id)
                await store.create(good)
                queued, transition = next_step(good, _S.QUEUED, reason=bad)
                await _raises(PayloadError, store.save(queued, 0, [transition]))
                await _raises(PayloadError, store.append([transition]))
                progress = Progress(done=1, message=bad)
                await _raises(PayloadError, store.touch(task_id, progress=progress))
                await _raises(PayloadError, store.submit_command(_command(f"c{n}", reason=bad)))
                assert await store.get(task_id) == good
                assert await store.history(task_id) == []
                assert await store.claim_commands("node-a", lease_seconds=30) == []
                queued, transition = next_step(good, _S.QUEUED)
                await store.save(queued, 0, [transition])  # and the store carries on
                assert await store.history(task_id) == [transition]

    async def test_datetimes_come_back_in_utc_to_the_microsecond(self) -> None:
        shanghai = timezone(timedelta(hours=8))
        at = datetime(2026, 10, 2, 16, 30, 5, 123457, tzinfo=shanghai)
        async with self._store() as store:
            snapshot = make_snapshot("t", created_at=at, updated_at=at, queued_at=at)
            queued, transition = next_step(snapshot, _S.QUEUED)
            await store.create(snapshot)
            await store.save(queued, expect_version=0, transitions=[transition])
            await store.touch("t", heartbeat=at + timedelta(microseconds=1))
            stored = await store.get("t")
            (recorded,) = await store.history("t")
            assert stored is not None
            for value in (stored.created_at, stored.queued_at, recorded.at):
                assert value is not None
                assert value.utcoffset() == timedelta(0)
            assert stored.created_at == at
            assert stored.created_at.microsecond == 123457
            assert stored.last_heartbeat_at == at + timedelta(microseconds=1)
            assert recorded.at == transition.at
