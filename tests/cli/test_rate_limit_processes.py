"""A cluster-wide rate limit across three ``chongming worker`` processes on one store.

The fleet runs ``--rate-limit vendor-api=5/s`` over a backlog bigger than
the window can start. Starts are measured from the store: the ``running``
transition of every task. In every sliding second there are never more
than 5 + burst (burst 1: the GCRA decision allows 5 per second by grant
time, plus one for the moment between a grant and its ``running`` write),
and the fleet uses at least 90 % of the allowed rate. Untagged work on the
same queue is not held back. Run on SQLite and on PostgreSQL; the window is
a few seconds in ``make test`` and 30 s with ``CHONGMING_PROOFS=full``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from datetime import datetime

import pytest

from chongming import Controller, TaskStatus
from tests.cli.test_processes import _Lines
from tests.cli.test_worker_process import ROOT, _client_store, _finish, plane
from tests.control.test_rate_limits import most_in_a_window
from tests.tiers import proof_size

__all__ = ["plane"]

RATE = 5
BURST = 1
SECONDS = proof_size("CHONGMING_RATE_SECONDS", reduced=4, full=30)

pytestmark = [pytest.mark.slow, pytest.mark.proof]


def _worker(options: list[str], owner: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    command = ["worker", "--tasks", "tests.cli.rate_tasks", "--max-parallel", "4"]
    command += ["--rate-limit", f"vendor-api={RATE}/s", "--poll-interval", "0.2"]
    return subprocess.Popen(
        [sys.executable, "-m", "chongming", *options, "--owner", owner, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
        env=env,
    )


async def _started_at(client: Controller, task_id: str) -> datetime:
    history = await client.history(task_id)
    return next(t.at for t in history if t.to_status is TaskStatus.RUNNING)


async def test_three_workers_never_pass_the_rate_and_use_most_of_it(
    plane: tuple[list[str], object],
) -> None:
    options, where = plane
    limited_count = RATE * SECONDS + 1  # the first start, then one every 1/RATE s
    client = Controller(store=_client_store(where), owner="client")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            await client.start()
            stack.push_async_callback(client.close, close_store=True)
            limited = [
                await client.enqueue("call_vendor", task_id=f"v-{n:03d}")
                for n in range(limited_count)
            ]
            plain = [await client.enqueue("plain", task_id=f"p-{n:03d}") for n in range(30)]
            workers = [_worker(options, f"w-{n}") for n in range(3)]
            for worker in workers:
                await asyncio.to_thread(_Lines(worker).next)  # "worker ... serving ..."
            plain_done = [await task.wait(timeout=30) for task in plain]
            done = [await task.wait(timeout=SECONDS * 3 + 30) for task in limited]
            starts = [await _started_at(client, task.task_id) for task in limited]
            plain_starts = [await _started_at(client, task.task_id) for task in plain]
    finally:
        for worker in workers:
            _finish(worker)
    assert {final.status for final in done} == {TaskStatus.SUCCEEDED}
    assert {final.status for final in plain_done} == {TaskStatus.SUCCEEDED}
    peak = most_in_a_window(starts, 1.0)
    assert peak <= RATE + BURST, f"{peak} starts in one second"
    span = (max(starts) - min(starts)).total_seconds()
    used = (len(starts) - 1) / span
    print(f"rate proof: {len(starts)} starts, peak {peak}/s, used {used:.2f}/s of {RATE}/s")
    assert used >= 0.9 * RATE, f"the fleet used {used:.2f} starts/s of {RATE}"
    # Untagged work was not queued behind the limited backlog: it all started
    # while most of the limited tasks still waited for their grant.
    assert max(plain_starts) < sorted(starts)[len(starts) // 2]
