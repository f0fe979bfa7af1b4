"""The zombie after takeover: a worker frozen past its lease cannot write over its successor.

Worker A runs a durable task of five operations (``ctx.effect``, each body
taking a moment). The test SIGSTOPs A inside the second operation's body;
A's lease expires, worker B's reconcile resumes the task, and B finishes it.
Then A is thawed: its operation finishes, and its commit of that operation
is refused (``FencingError``: a newer epoch holds the task), so it commits no
business row; the progress and heartbeats it goes on reporting do not land
(its touches name it as the owner), and its terminal write is refused too. In the
end: the task succeeded on B, one side-table row per operation, and the
history shows A's attempt lost. Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from chongming import Controller, TaskStatus
from chongming.state.triggers import Trigger
from tests.cli.test_durable_processes import _rows, _side_table, _started, _worker
from tests.cli.test_worker_process import DEADLINE, _client_store, _finish, plane

__all__ = ["plane"]


ZOMBIE_TTL = 2.0


async def _line(ledger: Path, prefix: str, timeout: float = DEADLINE) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(ledger.exists):
            for line in (await asyncio.to_thread(ledger.read_text)).splitlines():
                if line.startswith(prefix):
                    return line
        await asyncio.sleep(0.02)
    raise AssertionError(f"no ledger line {prefix!r} within {timeout}s")


async def test_a_thawed_zombie_commits_nothing_after_takeover(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    options, where = plane
    ledger = tmp_path / "ledger.txt"
    table = await _side_table(where)
    # B's lease must not lapse while the machine is loaded (the suite runs in
    # parallel): only A's may, the frozen one. A 2 s lease is renewed every 0.67 s.
    a = await _started(_worker(options, "w-a", tmp_path, ttl=ZOMBIE_TTL), tmp_path / "w-a.err")
    b = None
    try:
        client = Controller(store=_client_store(where), owner="client", poll_interval=0.05)
        async with client:
            store = client.store
            assert store is not None
            queued = await client.enqueue("five_effects", str(ledger), table, 0.6, task_id="z-1")
            line = await _line(ledger, "effect z-1:row:1 ")  # A is inside operation 1's body
            assert line.endswith(str(a.pid))
            os.kill(a.pid, signal.SIGSTOP)
            b = await _started(
                _worker(options, "w-b", tmp_path, ttl=ZOMBIE_TTL), tmp_path / "w-b.err"
            )
            final = await queued.wait(timeout=DEADLINE)
            assert final.status is TaskStatus.SUCCEEDED
            assert final.owner == "w-b"
            os.kill(a.pid, signal.SIGCONT)  # the zombie wakes up inside operation 1
            # It finishes the body, its commit is refused, it reports progress and
            # heartbeats for a second, then gives up.
            await _line(ledger, f"fenced z-1:row:1 {a.pid}")
            await asyncio.sleep(0.5)  # room for a last touch of A's to (not) land
            after = await store.get("z-1")
            history = await store.history("z-1")
            for worker in (a, b):
                worker.send_signal(signal.SIGTERM)
            codes = [await asyncio.to_thread(w.wait, DEADLINE) for w in (a, b)]
            await client.close(close_store=True)
        rows = await _rows(where, table)
    finally:
        for left in (a, b):
            if left is not None:
                if left.poll() is None:
                    os.kill(left.pid, signal.SIGCONT)
                _finish(left)
    assert codes == [0, 0]
    assert after is not None
    assert (after.status, after.status_version) == (TaskStatus.SUCCEEDED, final.status_version)
    # A's touches named it as the owner; B owns the task: none landed.
    assert after.progress is None or "zombie" not in (after.progress.message or "")
    assert after.last_heartbeat_at == final.last_heartbeat_at
    assert sorted(rows) == [f"z-1:row:{n}" for n in range(5)]  # one each: A's commit refused
    lost = [t for t in history if t.trigger == Trigger.LEASE_EXPIRED]
    assert [(t.from_status, t.to_status) for t in lost] == [
        (TaskStatus.RUNNING, TaskStatus.RETRY_WAIT)
    ]
    ran = (await asyncio.to_thread(ledger.read_text)).splitlines()
    # Operation 1 ran twice (A began it, B redid it, told it was resumed); the others once.
    assert sum(1 for r in ran if r.startswith("effect z-1:row:1 ")) == 2
    # A, thawed, finished the body and its commit was refused by the fence.
    assert f"fenced z-1:row:1 {a.pid}" in ran
