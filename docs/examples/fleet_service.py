"""The service of the deployed fleet (deploy/): enqueue work, wait for it, report.

It registers nothing: the workers run ``sync-tenant`` (``fleet_tasks.py``).
The store comes from the environment the fleet shares, as the command line
reads it: ``CHONGMING_DB`` (a PostgreSQL DSN in deploy/) and, optionally,
``CHONGMING_SCHEMA``::

    CHONGMING_DB=postgresql://app@db/chongming python fleet_service.py --tasks 20

Exit code 0 once every task succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter

from chongming import Controller, TaskStatus, TaskStore


def store_from_environment() -> TaskStore | str:
    location = os.environ.get("CHONGMING_DB", "chongming.db")
    schema = os.environ.get("CHONGMING_SCHEMA")
    if schema and location.startswith(("postgresql:", "postgres:")):
        from chongming import PostgresTaskStore

        return PostgresTaskStore(location, schema=schema)
    return location


async def main(tasks: int, timeout: float) -> int:
    store = store_from_environment()
    async with Controller(store=store, owner="fleet-service") as service:
        queued = [
            await service.enqueue("sync-tenant", f"tenant-{n}", idempotency_key=f"sync-{n}")
            for n in range(tasks)
        ]
        finals = await asyncio.gather(*(q.wait(timeout=timeout) for q in queued))
    if isinstance(store, TaskStore):
        await store.close()
    statuses = Counter(final.status.value for final in finals)
    owners = Counter(final.owner for final in finals)
    print(f"{statuses[TaskStatus.SUCCEEDED.value]} of {tasks} succeeded; by worker: {dict(owners)}")
    return 0 if statuses[TaskStatus.SUCCEEDED.value] == tasks else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=120.0)
    options = parser.parse_args()
    sys.exit(asyncio.run(main(options.tasks, options.timeout)))
