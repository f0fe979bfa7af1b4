"""An enqueuer process of the queue load proof: a client that enqueues ``mark`` tasks.

``python -m tests.cli.load_enqueuer OUT LEDGER PREFIX COUNT SEED --db PATH``
(or ``--dsn DSN --schema NAME``) opens a plain client (no ``work=True``: it
registers and runs nothing) and enqueues ``COUNT`` tasks ``PREFIX-00000``...
with random priorities 0-9, a few at a time. For each it notes, once
``enqueue`` has returned (the row is committed), the monotonic clock, the
priority and the stored ``queued_at``: what the claim check needs to know
which tasks were waiting when. The notes go to ``OUT`` at the end; the exit
code is 0 only if every enqueue created its task.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chongming import Controller
from chongming.stores.base import TaskStore

CONCURRENCY = 4
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _store(args: argparse.Namespace) -> TaskStore | Path:
    if args.db is not None:
        return Path(args.db)
    from chongming.stores.postgres import PostgresTaskStore

    return PostgresTaskStore(args.dsn, schema=args.schema, max_size=CONCURRENCY)


async def _enqueue_all(args: argparse.Namespace) -> list[str]:
    rng = random.Random(args.seed)
    priorities = [rng.randint(0, 9) for _ in range(args.count)]
    notes: list[str] = []
    client = Controller(store=_store(args), owner=f"enqueuer-{args.prefix}")
    async with client:

        async def share(first: int) -> None:
            for n in range(first, args.count, CONCURRENCY):
                task_id = f"{args.prefix}-{n:05d}"
                queued = await client.enqueue(
                    "mark", args.ledger, task_id, task_id=task_id, priority=priorities[n]
                )
                done = time.monotonic_ns()
                assert queued.created, task_id
                stored = queued.snapshot.queued_at
                assert stored is not None, task_id
                micros = (stored - _EPOCH) // _MICROSECOND
                notes.append(f"{task_id} {priorities[n]} {micros} {done}\n")

        await asyncio.gather(*(share(first) for first in range(CONCURRENCY)))
        await client.close(close_store=True)
    return notes


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("ledger")
    parser.add_argument("prefix")
    parser.add_argument("count", type=int)
    parser.add_argument("seed", type=int)
    parser.add_argument("--db")
    parser.add_argument("--dsn")
    parser.add_argument("--schema")
    args = parser.parse_args()
    notes = asyncio.run(_enqueue_all(args))
    Path(args.out).write_text("".join(notes))
    sys.stdout.write(f"enqueued {len(notes)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
