"""A stop sent to a task's holder that parked (or handed it back) before applying it.

The stop goes as a command to the node that held the task when it was
sent. If the task parks first (a durable wait: ``queued``, nobody's), that
node no longer holds it: releasing the command left the task parked until
its wake-up (60 s in the flaky stored-pipeline test this came from), when a
claim would at last meet the command. The node that claims the command now
writes the stop itself, as a stop of an unheld task is written.
"""

from __future__ import annotations

from datetime import UTC, datetime

from chongming.plane.apply import apply_command
from chongming.state.status import TaskStatus
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.nodes import Command, CommandKind
from chongming.testing.store_contract import make_snapshot, next_step

S = TaskStatus
AT = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)


def _command(kind: CommandKind, task_id: str = "t-1") -> Command:
    return Command(
        command_id=f"c-{kind.value}",
        task_id=task_id,
        kind=kind,
        created_at=AT,
        actor="user",
        reason="not tonight",
        target_owner="node-a",
    )


async def _parked(store: InMemoryTaskStore) -> None:
    """Held by node-a, then parked: ``queued`` again, nobody's."""
    snapshot = make_snapshot("t-1")
    await store.create(snapshot)
    path: list[tuple[TaskStatus, str | None]] = [
        (S.QUEUED, "node-a"), (S.STARTING, "node-a"), (S.RUNNING, "node-a"),
    ]  # fmt: skip
    path += [(S.RETRY_WAIT, "node-a"), (S.QUEUED, None)]
    for to, owner in path:
        moved, transition = next_step(snapshot, to, owner=owner)
        await store.save(moved, expect_version=snapshot.status_version, transitions=[transition])
        snapshot = moved


async def test_a_stop_for_a_task_that_parked_meanwhile_is_written_by_whoever_claims_it() -> None:
    async with InMemoryTaskStore() as store:
        await _parked(store)
        outcome = await apply_command(
            _command(CommandKind.STOP), held=lambda _: None, store=store, owner="node-a",
            at=lambda: AT,
        )  # fmt: skip
        assert outcome == "applied: stopped (nobody held it any more)"
        stopped = await store.get("t-1")
        assert stopped is not None
        assert (stopped.status, stopped.owner) == (S.STOPPED, None)
        last = (await store.history("t-1"))[-1]
        assert (last.trigger, last.actor, last.reason) == ("user:stop", "user", "not tonight")


async def test_a_pause_for_a_parked_task_is_still_released_for_its_next_holder() -> None:
    async with InMemoryTaskStore() as store:
        await _parked(store)
        outcome = await apply_command(
            _command(CommandKind.PAUSE), held=lambda _: None, store=store, owner="node-a",
            at=lambda: AT,
        )  # fmt: skip
        assert outcome is None
        still = await store.get("t-1")
        assert still is not None
        assert still.status is S.QUEUED


async def test_a_stop_for_a_task_another_live_node_holds_is_released_to_it() -> None:
    async with InMemoryTaskStore() as store:
        snapshot = make_snapshot("t-1")
        await store.create(snapshot)
        for to in (S.QUEUED, S.STARTING, S.RUNNING):
            moved, transition = next_step(snapshot, to, owner="node-b")
            await store.save(
                moved, expect_version=snapshot.status_version, transitions=[transition]
            )
            snapshot = moved
        outcome = await apply_command(
            _command(CommandKind.STOP), held=lambda _: None, store=store, owner="node-a",
            at=lambda: AT,
        )  # fmt: skip
        assert outcome is None
        running = await store.get("t-1")
        assert running is not None
        assert running.status is S.RUNNING
