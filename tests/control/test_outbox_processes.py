"""The outbox relay as real processes: SIGKILLed mid-batch, and three at once.

The business database and the store are two schemas on the test server, each
reached through its own pool, so no transaction covers both (as with two
databases). A writer keeps committing rows (an order and its outbox row in
one transaction; some transactions roll back) while relay processes
(tests/control/relay_main.py) move them:

- ``test_relay_killed_mid_batch``: a relay is SIGKILLed at a random moment
  while relaying, ``CHONGMING_RELAY_KILLS`` times (15 in ``make test``, 50 in
  ``make proofs``); the next one, started while the previous worked, takes over.
- ``test_three_relays_and_late_committers``: three relays at once, and
  transactions that take an outbox id, wait until a later row is published,
  then commit.

Afterwards, read from the databases themselves: every committed row is
exactly one task (one per ``outbox:<id>`` key, with the row's input), no
rolled-back row has one, and every row is marked published.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chongming import outbox_enqueue
from tests.stores.pg_support import DSN, REPO, drop_schema, fresh_name, require_postgres
from tests.tiers import proof_size

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

KILLS = proof_size("CHONGMING_RELAY_KILLS", reduced=15, full=50)
WRITE_RATE = 400.0  # rows per second offered by the writer...
BACKLOG = 300  # ...who waits while this many rows are unpublished (relays stay busy, drains end)
ROLLBACK_SHARE = 0.25


@dataclass(slots=True)
class Setup:
    store_schema: str
    business: str
    pool: Any  # asyncpg pool on the business database
    logs: Path

    @property
    def table(self) -> str:
        return f"{self.business}.outbox"


@dataclass(slots=True)
class Written:
    """What the writer's transactions did, as the writer saw them."""

    committed: set[int] = field(default_factory=set)
    rolled_back: set[int] = field(default_factory=set)


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    require_postgres()
    import asyncpg  # type: ignore[import-untyped]

    from chongming import Controller, install_outbox
    from chongming.stores.postgres import PostgresTaskStore

    store_schema, business = fresh_name("obps"), fresh_name("obpb")
    pool = await asyncpg.create_pool(DSN, min_size=1, max_size=6)
    try:
        async with pool.acquire() as conn:
            await conn.execute(f'CREATE SCHEMA "{business}"')
            await conn.execute(
                f'CREATE TABLE "{business}".orders (id bigserial PRIMARY KEY, item text NOT NULL)'
            )
            await install_outbox(conn, table=f"{business}.outbox")
        # Create the store's schema once, so relays do not all migrate it at start.
        async with Controller(store=PostgresTaskStore(DSN, schema=store_schema)) as controller:
            assert controller.store is not None
            await controller.store.open()
            await controller.close(close_store=True)
        yield Setup(store_schema, business, pool, tmp_path)
    finally:
        await pool.close()
        await drop_schema(store_schema)
        await drop_schema(business)


class Relay:
    """A relay process; its stderr goes to a file (a pipe nobody reads could fill)."""

    count = 0

    def __init__(
        self, setup: Setup, *, wait_go: bool = False, batch: int = 50, owner: str | None = None
    ) -> None:
        Relay.count += 1
        self.name = f"relay-{Relay.count}"
        self.owner = owner or self.name
        self.stderr_path = setup.logs / f"{self.name}.err"
        with self.stderr_path.open("w") as stderr:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.control.relay_main",
                    *("--store-dsn", DSN, "--store-schema", setup.store_schema),
                    *("--business-dsn", DSN, "--table", setup.table),
                    *("--owner", self.owner, "--batch", str(batch), "--poll-interval", "0.02"),
                    *(["--wait-go"] if wait_go else []),
                ],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )

    def errors(self) -> str:
        return self.stderr_path.read_text()[-3000:]

    async def expect(self, word: str, timeout: float = 30) -> str:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.process.stdout.readline), timeout)
        if not line.strip().startswith(word):
            await asyncio.to_thread(self.kill)
            raise AssertionError(f"{self.name} said {line!r}, not {word!r}: {self.errors()}")
        return line.strip()

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    async def stop(self) -> dict[str, int]:
        """SIGTERM: the relay finishes its batch, reports and exits 0."""
        self.process.send_signal(signal.SIGTERM)
        report: dict[str, int] = json.loads(await self.expect("{"))
        code = await asyncio.to_thread(self.process.wait, 30)
        assert code == 0, self.errors()
        self.close_pipes()
        return report

    def kill(self) -> None:
        """SIGKILL (if still running) and reap: no process or pipe outlives the test."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.close_pipes()

    def close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


async def write(setup: Setup, written: Written, stop: asyncio.Event, seed: int) -> None:
    """Commit (or roll back) order + outbox rows at about ``WRITE_RATE`` rows per second.

    It pauses while ``BACKLOG`` rows wait: the relays always have work, and a
    relay slowed down by a loaded machine does not leave an endless drain.
    """
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    started, rows, looked = loop.time(), 0, loop.time()
    async with setup.pool.acquire() as conn:
        while not stop.is_set():
            transaction = conn.transaction()
            await transaction.start()
            ids = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                order = await conn.fetchval(
                    f"INSERT INTO \"{setup.business}\".orders (item) VALUES ('x') RETURNING id"
                )
                ids.append(
                    await outbox_enqueue(
                        conn, "ship", order, table=setup.table, priority=order % 3, note="x"
                    )
                )
                rows += 1
            if rng.random() < ROLLBACK_SHARE:
                await transaction.rollback()
                written.rolled_back.update(ids)
            else:
                await transaction.commit()
                written.committed.update(ids)
            await asyncio.sleep(max(0.0, started + rows / WRITE_RATE - loop.time()))
            if loop.time() - looked > 0.1:
                while not stop.is_set() and await pending(setup) > BACKLOG:
                    await asyncio.sleep(0.02)
                started, rows, looked = loop.time(), 0, loop.time()


async def scalar(setup: Setup, sql: str) -> Any:
    async with setup.pool.acquire() as conn:
        return await conn.fetchval(sql.format(b=setup.business, s=setup.store_schema))


async def stranded(setup: Setup) -> int:
    """Rows whose task exists while the row is unpublished: a relay died between the two."""
    return int(
        await scalar(
            setup,
            'SELECT count(*) FROM "{b}".outbox o JOIN "{s}".tasks t'
            " ON t.idempotency_key = 'outbox:' || o.id WHERE o.published_at IS NULL",
        )
    )


async def pending(setup: Setup) -> int:
    """Rows a relay would take (the outbox's partial index answers this)."""
    return int(
        await scalar(
            setup,
            'SELECT count(*) FROM "{b}".outbox WHERE published_at IS NULL AND error IS NULL',
        )
    )


async def unpublished(setup: Setup) -> int:
    return int(await scalar(setup, 'SELECT count(*) FROM "{b}".outbox WHERE published_at IS NULL'))


async def wait_all_published(setup: Setup, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while left := await unpublished(setup):
        assert time.monotonic() < deadline, f"{left} rows stayed unpublished"
        await asyncio.sleep(0.05)


async def verify(setup: Setup, written: Written) -> int:
    """Exactly one task per committed row, with its input; nothing for rolled-back rows."""
    async with setup.pool.acquire() as conn:
        rows = {r["id"] for r in await conn.fetch(f'SELECT id FROM "{setup.business}".outbox')}
        orders = await conn.fetchval(f'SELECT count(*) FROM "{setup.business}".orders')
        unpublished = await conn.fetchval(
            f'SELECT count(*) FROM "{setup.business}".outbox WHERE published_at IS NULL'
        )
        keys = Counter(
            {
                r["idempotency_key"]: r["n"]
                for r in await conn.fetch(
                    f'SELECT idempotency_key, count(*) AS n FROM "{setup.store_schema}".tasks'
                    " GROUP BY idempotency_key"
                )
            }
        )
        mismatched = await conn.fetchval(
            f'SELECT count(*) FROM "{setup.business}".outbox o'
            f" JOIN \"{setup.store_schema}\".tasks t ON t.idempotency_key = 'outbox:' || o.id"
            " WHERE t.name <> o.name OR t.args <> o.args OR t.kwargs <> o.kwargs"
            " OR t.priority <> (o.options->>'priority')::int OR t.status <> 'queued'"
        )
    assert rows == written.committed, "the outbox holds other rows than the writer committed"
    assert orders == len(rows)  # each committed order has its outbox row, and only those
    assert unpublished == 0
    duplicated = {key: n for key, n in keys.items() if n > 1}
    assert duplicated == {}, f"{len(duplicated)} rows became more than one task"
    missing = {f"outbox:{row}" for row in rows} - set(keys)
    assert missing == set(), f"{len(missing)} committed rows became no task"
    assert set(keys) == {f"outbox:{row}" for row in rows}  # no task for any other row
    assert not {f"outbox:{row}" for row in written.rolled_back} & set(keys)
    assert mismatched == 0, "a task does not carry its row's input"
    return len(rows)


async def serve_version_2(setup: Setup) -> None:
    """A live worker of ship@2 appears: from now on relays pin unversioned rows to @2."""
    from chongming.stores.nodes import NodeInfo
    from chongming.stores.postgres import PostgresTaskStore

    info = NodeInfo(
        owner="worker-v2",
        incarnation="i",
        host="h",
        pid=1,
        version="0",
        num_buckets=1,
        serves=frozenset({"ship@2"}),
    )
    async with PostgresTaskStore(DSN, schema=setup.store_schema, max_size=1) as store:
        await store.register_node(info, ttl_seconds=600)


@pytest.mark.proof
async def test_relay_killed_mid_batch(setup: Setup) -> None:
    """Halfway, right after a kill that stranded rows, a worker of ship@2 goes live.

    The next relay replays the stranded rows pinned to @2 while their tasks
    were enqueued unversioned: it must take them as its own (the relay before
    the fix hit ``IdempotencyConflict`` on every round and relayed nothing more).
    """
    rng = random.Random(20_250_611)
    written, stop_writing = Written(), asyncio.Event()
    writer = asyncio.create_task(write(setup, written, stop_writing, seed=1))
    relays: list[Relay] = []
    started = time.monotonic()
    mid_batch, replayed_across_the_pin, kills = 0, 0, 0
    try:
        # One owner name for all: a relay is no node, so a restart is never refused.
        spare = Relay(setup, wait_go=True, owner="relay")
        relays.append(spare)
        await spare.expect("ready")
        # KILLS kills, and more (bounded) until one landed in the window after the
        # halfway pin switch: how often a kill lands there depends on the machine's speed.
        while kills < KILLS or (not replayed_across_the_pin and kills < 4 * KILLS):
            kills += 1
            current, spare = spare, Relay(setup, wait_go=True, owner="relay")  # warms up
            relays.append(spare)
            current.go()
            await current.expect("relaying")
            await asyncio.sleep(rng.uniform(0.05, 0.8))
            await asyncio.to_thread(current.kill)
            left = await stranded(setup)
            mid_batch += left > 0  # it died after enqueueing, before marking published
            if left and not replayed_across_the_pin and kills > KILLS // 2:
                await serve_version_2(setup)
                replayed_across_the_pin = left
            await spare.expect("ready")
        stop_writing.set()
        await writer
        spare.go()
        await spare.expect("relaying")
        await wait_all_published(setup)
        report = await spare.stop()
    finally:
        stop_writing.set()
        await asyncio.gather(writer, return_exceptions=True)
        for relay in relays:
            await asyncio.to_thread(relay.kill)
    elapsed = time.monotonic() - started
    total = await verify(setup, written)
    print(
        f"\n{kills} SIGKILLs in {elapsed:.1f} s; {mid_batch} between enqueue and publish;"
        f" {total} rows committed, {len(written.rolled_back)} rolled back;"
        f" last relay published {report['published']}, replayed {report['replayed']};"
        f" {replayed_across_the_pin} stranded rows replayed across the @2 pin"
    )
    assert total > KILLS  # the writer kept the relays busy
    assert mid_batch > 0  # some kills did land in the window idempotency has to cover
    assert replayed_across_the_pin > 0
    versions = await scalar(
        setup, 'SELECT array_agg(DISTINCT coalesce(version, 0)) FROM "{s}".tasks'
    )
    assert sorted(versions) == [0, 2]  # unversioned before the worker of @2, pinned after
    nodes = await scalar(setup, 'SELECT array_agg(owner) FROM "{s}".nodes')
    assert nodes == ["worker-v2"]  # the relays, all named "relay", never became nodes


async def late_committer(setup: Setup, written: Written, stop: asyncio.Event) -> list[int]:
    """Take an id, wait until a later row is published, then commit (a few roll back)."""
    late: list[int] = []
    rng = random.Random(7)
    async with setup.pool.acquire() as conn, setup.pool.acquire() as watcher:
        while not stop.is_set() and len(late) < 12:
            transaction = conn.transaction()
            await transaction.start()
            row = await outbox_enqueue(conn, "ship", -1, table=setup.table, priority=0, note="x")
            await conn.execute(f"INSERT INTO \"{setup.business}\".orders (item) VALUES ('late')")
            while not await watcher.fetchval(
                f'SELECT 1 FROM "{setup.business}".outbox'
                " WHERE id > $1 AND published_at IS NOT NULL LIMIT 1",
                row,
            ):
                await asyncio.sleep(0.01)
            if rng.random() < 0.25:
                await transaction.rollback()
                written.rolled_back.add(row)
            else:
                await transaction.commit()
                written.committed.add(row)
                late.append(row)
    return late


async def test_three_relays_and_late_committers(setup: Setup) -> None:
    written, stop_writing = Written(), asyncio.Event()
    relays = [Relay(setup) for _ in range(3)]
    writer: asyncio.Task[None] | None = None
    try:
        for relay in relays:
            await relay.expect("ready")
        for relay in relays:
            await relay.expect("relaying")
        writer = asyncio.create_task(write(setup, written, stop_writing, seed=2))
        late = await asyncio.wait_for(late_committer(setup, written, stop_writing), 60)
        stop_writing.set()
        await writer
        await wait_all_published(setup)
        reports = [await relay.stop() for relay in relays]
    finally:
        stop_writing.set()
        if writer is not None:
            await asyncio.gather(writer, return_exceptions=True)
        for relay in relays:
            await asyncio.to_thread(relay.kill)
    total = await verify(setup, written)
    print(f"\n3 relays moved {total} rows: {reports}; late committers: {len(late)}")
    assert len(late) >= 6
    assert sum(r["published"] for r in reports) == total  # no row was taken twice
    assert all(r["replayed"] == 0 for r in reports)  # SKIP LOCKED kept them apart
