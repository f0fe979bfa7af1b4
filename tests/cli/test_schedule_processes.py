"""The schedule proof: three ``chongming worker`` processes, SIGKILLed and restarted in turn,
run a 1-second schedule; every tick in the window fired exactly once, none twice.

"Fired" is what the store holds: one enqueued task per tick, named by the tick's
idempotency key. The window runs from the schedule's first tick to a second
before the schedule is paused; the keys in it must be exactly the ticks, each
once. ``catch_up="all"``, so a moment with no live worker delays ticks but
loses none. Reduced: 8 s; ``CHONGMING_PROOFS=full``: 60 s (the pass mark).
Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from chongming import Controller
from chongming.state.query import TaskQuery
from chongming.stores.schedules import tick_key
from tests.cli.schedule_tasks import tick
from tests.cli.test_processes import _Lines
from tests.cli.test_worker_process import DEADLINE, ROOT, _client_store, _finish, plane
from tests.tiers import proof_size

__all__ = ["plane"]

SECONDS = proof_size("CHONGMING_SCHEDULE_SECONDS", reduced=8, full=60)
PERIOD = timedelta(seconds=1)


def _worker(options: list[str], owner: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["worker", "--tasks", "tests.cli.schedule_tasks", "--max-parallel", "4"]
    command += ["--lease-ttl", "2", "--grace", "2"]
    return subprocess.Popen(
        [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.proof
@pytest.mark.slow
@pytest.mark.timeout(SECONDS * 4 + 120)
async def test_every_tick_fires_exactly_once_while_workers_are_killed(
    plane: tuple[list[str], object],
) -> None:
    options, where = plane
    chooser = random.Random(25)
    generation = 0
    workers = [_worker(options, f"w-{n}-0") for n in range(3)]
    everyone = list(workers)
    kills = 0
    try:
        for worker in workers:
            await asyncio.to_thread(_Lines(worker).next)  # "serving ..."
        client = Controller(store=_client_store(where), owner="client")
        async with client:
            client.register("tick", tick)
            record = await client.schedule("tick", every=PERIOD, key="proof", catch_up="all")
            end = time.monotonic() + SECONDS
            while time.monotonic() < end:
                await asyncio.sleep(chooser.uniform(0.2, 1.2))
                slot = chooser.randrange(3)
                victim = workers[slot]
                victim.send_signal(signal.SIGKILL)
                await asyncio.to_thread(victim.wait, DEADLINE)
                kills += 1
                generation += 1
                workers[slot] = _worker(options, f"w-{slot}-{generation}")
                everyone.append(workers[slot])
                await asyncio.to_thread(_Lines(workers[slot]).next)  # serving again
            stopped_at = await client.schedules()
            await client.pause_schedule("proof")
            paused = await client.schedules()
            tasks = await client.list_tasks(TaskQuery())
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            codes = [await asyncio.to_thread(w.wait, DEADLINE) for w in workers]
            await client.close(close_store=True)
    finally:
        for worker in everyone:
            _finish(worker)
    assert kills >= 3
    assert codes == [0, 0, 0]
    keys = [t.idempotency_key for t in tasks if t.name == "tick"]
    assert None not in keys  # every task was enqueued by the schedule, under its tick's key
    assert len(keys) == len(set(keys)), "a tick fired twice"
    (before,) = stopped_at
    (after,) = paused
    # Every tick from the first to the last one decided before the pause, each once.
    first = record.next_fire
    last = after.next_fire - PERIOD
    assert last >= before.next_fire - PERIOD
    count = round((last - first) / PERIOD) + 1
    assert count >= SECONDS - 3
    expected = sorted(tick_key("proof", first + k * PERIOD) for k in range(count))
    assert sorted(k or "" for k in keys) == expected, "a tick was skipped or extra"
