"""Both write paths: trusted writes (the runtime's own) and every public entry point.

A :class:`~chongming.stores.writes.StateWrite` marked ``trusted`` holds
records the runtime made and checked where it made them; a store may write
it without checking it again. What it stores must be exactly what the
checked path stores for the same records, with the same outcome for each
write (conflict, duplicate, missing, a re-send). Every other entry point
(``create``, ``save``, ``append``, ``enqueue``, ``submit_command``, an
unmarked ``apply_writes``) keeps every check: a bad record is refused with
:class:`~chongming.errors.PayloadError` and nothing of it is written.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta, timezone

from chongming.errors import PayloadError
from chongming.state.records import Failure, FailureKind, Progress, TaskSnapshot, Transition
from chongming.stores.base import TaskStore
from chongming.stores.writes import StateWrite, WriteOutcome
from chongming.testing.store_contract._support import (
    _S,
    T0,
    ContractBase,
    _command,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["TrustedWriteContract"]

_W = WriteOutcome
_EAST = timezone(timedelta(hours=2))


def _made_by_the_runtime(task_id: str) -> list[tuple[TaskSnapshot, tuple[Transition, ...]]]:
    """A full trajectory as a run makes it: each snapshot with the transitions since the last.

    Payloads in their JSON form, tags, a bucket key, progress, a failure
    whose text holds what storable_text leaves, and one time in another zone
    (a caller's ``not_before``) that must come back as the same instant.
    """
    created = make_snapshot(
        task_id,
        bucket=3,
        bucket_key="tenant-7",
        tags=frozenset({"io", "重明"}),
        priority=2,
        args=("2026-10-02", 7, [1, 2], {"k": None}),
        kwargs={"mode": "full", "n": 3.5},
        not_before=(T0 + timedelta(seconds=30)).astimezone(_EAST),
    )
    steps: list[tuple[TaskSnapshot, tuple[Transition, ...]]] = [(created, ())]
    queued, to_queued = next_step(created, _S.QUEUED, owner="node-a")
    starting, to_starting = next_step(queued, _S.STARTING)
    running, to_running = next_step(
        starting, _S.RUNNING, progress=Progress(done=1, total=4, unit="parts", message="p1")
    )
    steps.append((starting, (to_queued, to_starting)))  # coalesced, as the write-through does
    failure = Failure(
        kind=FailureKind.EXCEPTION,
        message="ValueError: bad row \\x00 in 'tenant-7'",
        exception_type="ValueError",
        retryable=True,
    )
    waiting, to_waiting = next_step(running, _S.RETRY_WAIT, failure=failure)
    steps.append((waiting, (to_running, to_waiting)))
    again, to_again = next_step(waiting, _S.QUEUED)
    starting_2, to_starting_2 = next_step(again, _S.STARTING)
    running_2, to_running_2 = next_step(starting_2, _S.RUNNING)
    done, to_done = next_step(
        running_2, _S.SUCCEEDED, result={"rows": [1, 2, 3], "ok": True}, failure=None
    )
    steps.append((done, (to_again, to_starting_2, to_running_2, to_done)))
    return steps


def _renamed(snapshot: TaskSnapshot, task_id: str) -> TaskSnapshot:
    return dataclasses.replace(snapshot, task_id=task_id)


def _renamed_steps(
    steps: list[tuple[TaskSnapshot, tuple[Transition, ...]]], task_id: str
) -> list[tuple[TaskSnapshot, tuple[Transition, ...]]]:
    return [
        (
            _renamed(snapshot, task_id),
            tuple(dataclasses.replace(t, task_id=task_id) for t in transitions),
        )
        for snapshot, transitions in steps
    ]


async def _write_steps(
    store: TaskStore,
    steps: list[tuple[TaskSnapshot, tuple[Transition, ...]]],
    *,
    trusted: bool,
) -> None:
    expect: int | None = None
    for snapshot, transitions in steps:
        write = StateWrite(
            snapshot=snapshot, transitions=transitions, expect_version=expect, trusted=trusted
        )
        (result,) = await store.apply_writes([write])
        assert result.outcome is _W.WRITTEN, (trusted, snapshot.status, result)
        expect = snapshot.status_version


class TrustedWriteContract(ContractBase):
    async def test_a_trusted_write_stores_exactly_what_the_checked_path_stores(self) -> None:
        async with self._store() as store:
            steps = _made_by_the_runtime("checked")
            await _write_steps(store, steps, trusted=False)
            await _write_steps(store, _renamed_steps(steps, "trusted"), trusted=True)
            checked = await store.get("checked")
            trusted = await store.get("trusted")
            assert checked is not None
            assert trusted is not None
            assert _renamed(trusted, "checked") == checked
            assert trusted.not_before == steps[0][0].not_before  # the same instant
            assert trusted.result == {"rows": [1, 2, 3], "ok": True}
            assert trusted.args == ("2026-10-02", 7, [1, 2], {"k": None})
            ours = [
                dataclasses.replace(t, task_id="checked") for t in await store.history("trusted")
            ]
            assert ours == await store.history("checked")
            assert [t.version for t in ours] == list(range(1, 9))

    async def test_a_trusted_batch_gives_each_write_its_own_outcome(self) -> None:
        async with self._store() as store:
            held = make_snapshot("held")
            moved = make_snapshot("moved")
            await store.create(held)
            await store.create(moved)
            moved_on, step = next_step(moved, _S.QUEUED)
            await store.save(moved_on, expect_version=0, transitions=[step])
            held_next, held_step = next_step(held, _S.QUEUED, owner="node-a")
            stale, stale_step = next_step(moved, _S.CANCELLED)
            ghost, ghost_step = next_step(make_snapshot("ghost"), _S.QUEUED)
            batch = [
                StateWrite(snapshot=make_snapshot("fresh"), transitions=(), trusted=True),
                StateWrite(
                    snapshot=stale, transitions=[stale_step], expect_version=0, trusted=True
                ),
                StateWrite(
                    snapshot=held_next, transitions=[held_step], expect_version=0, trusted=True
                ),
                StateWrite(
                    snapshot=make_snapshot("held", label="twin"), transitions=(), trusted=True
                ),
                StateWrite(
                    snapshot=ghost, transitions=[ghost_step], expect_version=0, trusted=True
                ),
            ]
            outcomes = [r.outcome for r in await store.apply_writes(batch)]
            assert outcomes == [_W.WRITTEN, _W.CONFLICT, _W.WRITTEN, _W.DUPLICATE, _W.NOT_FOUND]
            assert await store.get("held") == held_next
            assert await store.get("moved") == moved_on
            assert await store.get("ghost") is None
            assert await store.history("moved") == [step]
            # A re-send of what is stored is written; a loser stays a conflict.
            again = StateWrite(
                snapshot=held_next, transitions=[held_step], expect_version=0, trusted=True
            )
            assert (await store.apply_writes([again]))[0].outcome is _W.WRITTEN
            assert (await store.apply_writes([batch[1]]))[0].outcome is _W.CONFLICT
            assert await store.history("held") == [held_step]

    async def test_a_trusted_create_still_refuses_a_name_or_bucket_key_it_cannot_store(
        self,
    ) -> None:
        """The texts a run takes as given are checked once, on the trusted create."""
        async with self._store() as store:
            for task_id, bad in (
                ("n", make_snapshot("n", name="nul\x00name")),
                ("b", make_snapshot("b", bucket_key="lone \ud800 surrogate")),
            ):
                write = StateWrite(snapshot=bad, transitions=(), trusted=True)
                await _raises(PayloadError, store.apply_writes([write]))
                assert await store.get(task_id) is None

    async def test_every_public_entry_point_refuses_a_bad_record_and_writes_nothing(
        self,
    ) -> None:
        async with self._store() as store:
            good = make_snapshot("good")
            await store.create(good)
            bad_label = make_snapshot("bad", label="nul\x00label")
            bad_args = make_snapshot("args", args=(float("nan"),))
            naive = make_snapshot("naive", created_at=T0.replace(tzinfo=None))
            for record in (bad_label, bad_args, naive):
                await _raises(PayloadError, store.create(record))
                await _raises(PayloadError, store.enqueue(record))
                unmarked = StateWrite(snapshot=record, transitions=())
                await _raises(PayloadError, store.apply_writes([unmarked]))
                assert await store.get(record.task_id) is None
            queued, step = next_step(good, _S.QUEUED)
            bad_step = dataclasses.replace(step, trigger="bad\x00trigger")
            bad_save = dataclasses.replace(queued, owner="node\ud800")
            await _raises(PayloadError, store.save(queued, 0, [bad_step]))
            await _raises(PayloadError, store.save(bad_save, 0, [step]))
            await _raises(PayloadError, store.append([bad_step]))
            unmarked = StateWrite(snapshot=bad_save, transitions=[step], expect_version=0)
            await _raises(PayloadError, store.apply_writes([unmarked]))
            assert await store.get("good") == good
            assert await store.history("good") == []
            await _raises(PayloadError, store.submit_command(_command("c", reason="r\x00")))
            assert await store.command_records() == []
