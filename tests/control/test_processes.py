"""Two processes, one store: B sees A's tasks and controls them through commands.

Real processes on one SQLite file and on PostgreSQL: the history of a task
held by A records B's pause, resume and stop with B's reason, as the seed's
ops console shows.
"""

from __future__ import annotations

from chongming import Controller, TaskStatus
from chongming.state import audit_history
from chongming.state.triggers import Trigger
from chongming.stores.base import TaskStore
from tests.control.support import Node, wait_stored

S = TaskStatus


async def test_b_pauses_resumes_and_stops_a_task_held_by_a(
    shared: tuple[list[str], TaskStore],
) -> None:
    args, store = shared
    node = Node(*args, "--owner", "node-a", "--tasks", "3")
    try:
        assert [await node.line() for _ in range(4)] == [
            "ack job-0",
            "ack job-1",
            "ack job-2",
            "ready",
        ]
        async with Controller(store=store, owner="ops-b", poll_interval=0.05) as ops:
            listed = await ops.list_tasks()
            assert sorted(s.task_id for s in listed) == ["job-0", "job-1", "job-2"]
            assert {(s.status, s.owner) for s in listed} == {(S.RUNNING, "node-a")}
            assert await ops.pause("job-0", reason="maintenance") is False  # unconfirmed
            await wait_stored(store, "job-0", S.PAUSED)
            assert await ops.resume("job-0") is False
            await wait_stored(store, "job-0", S.RUNNING)
            assert await ops.stop("job-0", reason="from the ops console") is True
            await wait_stored(store, "job-0", S.STOPPED)
            assert await ops.stop_all(reason="done") == 0  # B holds nothing itself
            for task_id in ("job-1", "job-2"):
                await ops.stop(task_id, reason="cleanup")
        report = await node.finish()
    finally:
        node.kill()
    assert report["outcomes"] == {"job-0": "stopped", "job-1": "stopped", "job-2": "stopped"}
    assert report["let_go"] == []
    history = await store.history("job-0")
    steps = [(t.from_status, t.to_status, t.trigger, t.reason) for t in history]
    assert (S.RUNNING, S.PAUSING, Trigger.USER_PAUSE, "maintenance") in steps
    assert (S.PAUSING, S.PAUSED, Trigger.PAUSE_REACHED, None) in steps
    assert (S.PAUSED, S.RUNNING, Trigger.USER_RESUME, None) in steps
    assert steps[-2:] == [
        (S.RUNNING, S.STOPPING, Trigger.USER_STOP, "from the ops console"),
        (S.STOPPING, S.STOPPED, Trigger.STOP_CONFIRMED, "from the ops console"),
    ]
    snapshot = await store.get("job-0")
    assert snapshot is not None
    assert audit_history(snapshot, history) == []
