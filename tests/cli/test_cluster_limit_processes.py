"""A cluster-wide limit across three ``chongming worker`` processes, one killed while holding slots.

What runs is counted from the tasks' own marks (files that exist while a
task body runs, named by the worker's pid), sampled every few milliseconds:
the count of live workers' marks never passes the limit, and after the kill
it is back at the limit within the dead worker's lease TTL plus a second —
its slots came back by themselves, judged by the store's clock. The tasks it
was running end ``lost`` (reconciled by the survivors); every other task
succeeds. Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from chongming import Controller, TaskStatus
from tests.cli.test_processes import _Lines
from tests.cli.test_worker_process import DEADLINE, ROOT, _client_store, _finish, plane

__all__ = ["plane"]

LIMIT = 3
TASKS = 45
HOLD = 0.25
TTL = 2.0


def _worker(options: list[str], owner: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["worker", "--tasks", "tests.cli.limit_tasks", "--max-parallel", "3"]
    command += ["--cluster-limit", f"api={LIMIT}", "--lease-ttl", str(TTL), "--grace", "5"]
    return subprocess.Popen(
        [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
        env=env,
    )


def _marks(directory: Path) -> list[tuple[int, str]]:
    found = []
    for name in os.listdir(directory):
        pid, _, task_id = name.partition("-")
        found.append((int(pid), task_id))
    return found


async def test_the_fleet_never_passes_the_limit_and_a_dead_workers_slots_come_back(
    plane: tuple[list[str], object], tmp_path: Path
) -> None:
    options, where = plane
    marks = tmp_path / "marks"
    marks.mkdir()
    workers = [_worker(options, f"w-{n}") for n in range(3)]
    dead: set[int] = set()
    peak = 0
    try:
        for worker in workers:
            await asyncio.to_thread(_Lines(worker).next)  # "serving ..."
        client = Controller(store=_client_store(where), owner="client")
        async with client:
            queued = [
                await client.enqueue("call_api", str(marks), HOLD, task_id=f"c-{n:02d}")
                for n in range(TASKS)
            ]
            # Sample until the fleet runs at the limit, with the victim holding slots.
            victim = None
            deadline = time.monotonic() + DEADLINE
            while victim is None:
                assert time.monotonic() < deadline, "the fleet never reached the limit"
                running = _marks(marks)
                peak = max(peak, len(running))
                by_pid = [pid for pid, _ in running]
                if len(running) == LIMIT:
                    victim = next(w for w in workers if w.pid == max(by_pid, key=by_pid.count))
                await asyncio.sleep(0.005)
            victim.send_signal(signal.SIGKILL)
            await asyncio.to_thread(victim.wait, DEADLINE)
            dead.add(victim.pid)
            killed_at = time.monotonic()
            stranded = {task_id for pid, task_id in _marks(marks) if pid in dead}
            assert stranded  # it was running some when it died
            # The survivors run below the limit until the dead worker's lease expires.
            finals_future = asyncio.ensure_future(
                asyncio.gather(*(task.wait(timeout=DEADLINE * 2) for task in queued))
            )
            back_after = None
            while not finals_future.done():
                live = [m for m in _marks(marks) if m[0] not in dead]
                peak = max(peak, len(live))
                if back_after is None and len(live) == LIMIT:
                    back_after = time.monotonic() - killed_at
                await asyncio.sleep(0.005)
            finals = finals_future.result()
            survivors = [w for w in workers if w is not victim]
            for worker in survivors:
                worker.send_signal(signal.SIGTERM)
            codes = [await asyncio.to_thread(w.wait, DEADLINE) for w in survivors]
            await client.close(close_store=True)
    finally:
        for worker in workers:
            _finish(worker)
    assert codes == [0, 0]
    assert peak == LIMIT  # reached, and never passed at any sampled instant
    assert back_after is not None, "the dead worker's slots never came back"
    assert back_after <= TTL + 1.0
    lost = {final.task_id for final in finals if final.status is TaskStatus.LOST}
    assert lost == stranded  # exactly what died with it, recorded truthfully
    assert all(f.status is TaskStatus.SUCCEEDED for f in finals if f.task_id not in lost)
