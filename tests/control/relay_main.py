"""An outbox relay process for the process proofs: what a deployment runs, plus a handshake.

    python -m tests.control.relay_main --store-dsn DSN --store-schema S \
        --business-dsn DSN --table SCHEMA.TABLE [--owner NAME] [--batch N] [--wait-go]

It opens a client controller on the store (it runs no task) and an asyncpg
pool on the business database, prints ``ready``, then (with ``--wait-go``,
after reading a line on stdin, so a test can start the next relay while the
current one works) starts relaying and prints ``relaying``. On SIGTERM or
SIGINT it stops between batches, prints one JSON line (``published``,
``replayed``, ``refused``) and exits 0. SIGKILL is the point of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

import asyncpg  # type: ignore[import-untyped]

from chongming import Controller, OutboxRelay
from chongming.stores.postgres import PostgresTaskStore


async def main(options: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    store = PostgresTaskStore(options.store_dsn, schema=options.store_schema, max_size=8)
    pool = await asyncpg.create_pool(options.business_dsn, min_size=1, max_size=2)
    try:
        async with Controller(store=store, owner=options.owner) as controller:
            await store.open()
            print("ready", flush=True)
            if options.wait_go and not await asyncio.to_thread(sys.stdin.readline):
                return 0  # the test ended without using this spare
            relay = OutboxRelay(
                controller,
                pool,
                table=options.table,
                batch=options.batch,
                poll_interval=options.poll_interval,
            )
            async with relay:  # leaving it lets the batch in progress finish
                print("relaying", flush=True)
                await stop.wait()
            report = {"published": relay.published, "replayed": relay.replayed}
            print(json.dumps({**report, "refused": relay.refused}), flush=True)
            await controller.close(close_store=True)
    finally:
        await pool.close()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store-dsn", required=True)
    parser.add_argument("--store-schema", required=True)
    parser.add_argument("--business-dsn", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--owner", default="relay")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--poll-interval", type=float, default=0.05)
    parser.add_argument("--wait-go", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
