"""Enqueue N tasks, then drain them with workers; beside pgqueuer in the same run.

    python benchmarks/bench_queue.py [--n 10000] [--rounds 2] [--no-sqlite] [--per-call]

Full audit trail on: every task goes queued -> starting -> running ->
succeeded in the store, each transition with its history row. A client
controller enqueues N trivial tasks (``Controller.enqueue_many`` in chunks of
``--chunk``; ``--per-call``: that many concurrent ``enqueue`` calls instead),
then a worker drains them: one in this process (``Controller(work=True,
max_parallel=...)``), then 1 and 2 ``chongming worker`` processes (their
start-up counted in the drain). A drain counts from the worker's start to the
moment the store holds no unfinished task; that is probed every 20 ms with
one cheap query, so the probe does not load the server it measures.

CPU per task is counted on both sides of the in-process drains: this
process (``time.process_time``) and the server backends of the worker's
connections (found by ``application_name``, read from ``/proc/<pid>/stat``
when the server runs on this machine; "n/a" otherwise).

pgqueuer 1.6 (benchmark-only dependency, ``pip install -e '.[bench]'``)
enqueues the same N on the same server (batches of 1,000, one statement
each) and drains it in this process, swept over consumers x batch size
(``QueueManager.run(batch_size=...)``); the ratios compare against its best
drain of the round. Rounds interleave chongming and pgqueuer, so both see the
same load; every figure is printed, and the load average beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_control import DSN, drop

from chongming import Controller, SqliteTaskStore
from chongming.state.status import ACTIVE_STATUSES
from chongming.stores.base import TaskStore

MakeStore = Callable[..., TaskStore]
_ACTIVE = sorted(status.value for status in ACTIVE_STATUSES)


async def trivial(ctx: Any) -> int:
    return 1


class Probe:
    """Is anything unfinished? One indexed EXISTS on PostgreSQL, the counts on SQLite."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._conn: Any = None

    async def unfinished(self) -> bool:
        schema = getattr(self._store, "schema", None)
        if schema is None:
            counts = await self._store.task_counts(active_only=True)
            return sum(count.count for count in counts) > 0
        if self._conn is None:
            import asyncpg

            self._conn = await asyncpg.connect(DSN)
        found: bool = await self._conn.fetchval(
            f"SELECT EXISTS (SELECT 1 FROM {schema}.tasks WHERE status = ANY($1::text[]))",
            _ACTIVE,
        )
        return found

    async def wait_drained(self) -> None:
        while await self.unfinished():
            await asyncio.sleep(0.02)

    async def updates(self) -> tuple[int, int] | None:
        """(updates, HOT updates) of ``tasks`` so far, as the server's statistics count them."""
        schema = getattr(self._store, "schema", None)
        if schema is None or self._conn is None:
            return None
        # Backends report their counts at most once a second, and when they exit.
        await asyncio.sleep(1.2)
        await self._conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await self._conn.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
            " WHERE schemaname = $1 AND relname = 'tasks'",
            schema.strip('"'),
        )
        return None if row is None else (int(row[0]), int(row[1]))

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


async def enqueue_all(client: Controller, n: int, chunk: int, per_call: bool) -> float:
    """Enqueues per second: ``enqueue_many`` of ``chunk`` at a time (or concurrent calls)."""
    started = time.perf_counter()
    for first in range(0, n, chunk):
        size = min(n, first + chunk) - first
        if per_call:
            await asyncio.gather(*(client.enqueue("trivial") for _ in range(size)))
        else:
            await client.enqueue_many("trivial", [((), {})] * size)
    return n / (time.perf_counter() - started)


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


class ServerCpu:
    """CPU seconds of the server backends whose application_name is ``app`` (local server)."""

    def __init__(self, app: str) -> None:
        self._app = app
        self._conn: Any = None
        self._base: dict[int, float] = {}
        self.readable = True

    async def _pids(self) -> list[int]:
        if self._conn is None:
            import asyncpg

            self._conn = await asyncpg.connect(DSN)
        rows = await self._conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1", self._app
        )
        return [row[0] for row in rows]

    async def start(self) -> None:
        self._base = {}
        for pid in await self._pids():
            cpu = _proc_cpu(pid)
            if cpu is None:
                self.readable = False
            else:
                self._base[pid] = cpu
        self.readable = self.readable and bool(self._base)

    async def seconds(self) -> float | None:
        if not self.readable:
            return None
        total = 0.0
        for pid in await self._pids():
            cpu = _proc_cpu(pid)
            if cpu is not None:
                total += cpu - self._base.get(pid, 0.0)
        return total

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


def _us(seconds: float | None, n: int) -> str:
    return "n/a" if seconds is None else f"{seconds / n * 1e6:,.0f}"


async def enqueue_and_drain(
    make_store: MakeStore, n: int, chunk: int, max_parallel: int, per_call: bool = False
) -> tuple[float, float, float, float | None]:
    """(enqueues/s, drained/s, CPU s here while draining, server CPU s of the worker's backends)."""
    client_store = make_store()
    probe = Probe(client_store)
    async with Controller(store=client_store, owner="client") as client:
        enqueue_rate = await enqueue_all(client, n, chunk, per_call)
        worker_store = make_store(client_store, "chongming-bench-worker")
        worker = Controller(
            store=worker_store,
            owner="worker",
            work=True,
            max_parallel=max_parallel,
            keep_finished=100,
            poll_interval=0.05,
        )
        worker.register("trivial", trivial)
        server = ServerCpu("chongming-bench-worker")
        cpu = time.process_time()
        started = time.perf_counter()
        async with worker:
            await server.start()
            await probe.wait_drained()
            drain_rate = n / (time.perf_counter() - started)
            cpu = time.process_time() - cpu
            server_cpu = await server.seconds() if getattr(client_store, "schema", None) else None
        await server.close()
        await worker_store.close()
    updates = await probe.updates()
    if updates is not None:
        total, hot = updates
        share = f"{hot / total:.0%}" if total else "n/a"
        print(f"  PostgreSQL  tasks updates during the drain: {total:,}, HOT {hot:,} ({share})")
    await probe.close()
    await drop(client_store)
    await client_store.close()
    return enqueue_rate, drain_rate, cpu, server_cpu


async def single_enqueue_latency(make_store: MakeStore, samples: int) -> float:
    """p50 in ms of one ``enqueue`` call at a time (no worker)."""
    client_store = make_store()
    delays = []
    async with Controller(store=client_store, owner="client") as client:
        await client.enqueue("trivial")
        for _ in range(samples):
            started = time.perf_counter()
            await client.enqueue("trivial")
            delays.append((time.perf_counter() - started) * 1000)
    await drop(client_store)
    await client_store.close()
    return statistics.median(delays)


async def commit_latency(samples: int) -> float:
    """p50 in ms of a one-row INSERT and its commit on a plain connection: the disk's floor."""
    import asyncpg

    conn = await asyncpg.connect(DSN)
    table = "bench_commit_" + secrets.token_hex(3)
    delays = []
    try:
        await conn.execute(f"CREATE TABLE {table} (a int)")
        for _ in range(samples):
            started = time.perf_counter()
            await conn.execute(f"INSERT INTO {table} VALUES (1)")
            delays.append((time.perf_counter() - started) * 1000)
    finally:
        await conn.execute(f"DROP TABLE IF EXISTS {table}")
        await conn.close()
    return statistics.median(delays)


async def pgqueuer_round(n: int, consumers: int, batch: int) -> tuple[float, float, float, float]:
    """pgqueuer: (enqueue/s, drain/s, CPU s here while draining, server CPU s of its backends)."""
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    admin = await asyncpg.connect(DSN)
    name = "bench_pgq_" + secrets.token_hex(3)
    await admin.execute(f"CREATE DATABASE {name}")
    app = "bench-pgqueuer"
    conns: list[Any] = []
    try:
        dsn = DSN.rsplit("/", 1)[0] + "/" + name
        for _ in range(consumers):
            conns.append(await asyncpg.connect(dsn, server_settings={"application_name": app}))
        queries = Queries(AsyncpgDriver(conns[0]))
        await queries.install()
        started = time.perf_counter()
        for first in range(0, n, 1000):
            size = min(1000, n - first)
            await queries.enqueue(["trivial"] * size, [None] * size, [0] * size)
        enqueue_rate = n / (time.perf_counter() - started)
        managers = []
        for conn in conns:
            manager = QueueManager(Queries(AsyncpgDriver(conn)))

            @manager.entrypoint("trivial")
            async def job(_: Any) -> None:
                return None

            managers.append(manager)
        server = ServerCpu(app)
        await server.start()
        cpu = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(
            *(m.run(mode=QueueExecutionMode.drain, batch_size=batch) for m in managers)
        )
        drain_rate = n / (time.perf_counter() - started)
        cpu = time.process_time() - cpu
        server_cpu = await server.seconds()
        await server.close()
    finally:
        for conn in conns:
            await conn.close()
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    return enqueue_rate, drain_rate, cpu, server_cpu or 0.0


async def drain_with_processes(
    make_store: MakeStore, options: list[str], n: int, chunk: int, workers: int
) -> tuple[float, float]:
    """(enqueues/s, drained tasks/s) with ``workers`` ``chongming worker`` processes."""
    client_store = make_store()
    probe = Probe(client_store)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))
    async with Controller(store=client_store, owner="client") as client:
        enqueue_rate = await enqueue_all(client, n, chunk, per_call=False)
        started = time.perf_counter()
        serve = ["worker", "--tasks", "bench_queue_tasks", "--max-parallel", "500"]
        processes = [
            subprocess.Popen(  # noqa: ASYNC220 - a benchmark, timed around the drain only
                [sys.executable, "-m", "chongming", *options, "--owner", f"bench-{k}", *serve],
                stdout=subprocess.DEVNULL,
                env=env,
            )
            for k in range(workers)
        ]
        try:
            await probe.wait_drained()
            rate = n / (time.perf_counter() - started)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=60)
    await probe.close()
    await drop(client_store)
    await client_store.close()
    return enqueue_rate, rate


async def start_latency(make_store: MakeStore, samples: int) -> tuple[float, float]:
    """Enqueue -> ``started_at`` on an idle worker (p50, p99 in ms); it polls once a second."""
    client_store = make_store()
    worker_store = make_store(client_store)
    worker = Controller(store=worker_store, owner="idle", work=True, poll_interval=1.0)
    worker.register("trivial", trivial)
    delays = []
    async with Controller(store=client_store, owner="client") as client, worker:
        await asyncio.sleep(0.5)
        for _ in range(samples):
            sent = datetime.now(UTC)
            queued = await client.enqueue("trivial")
            final = await queued.wait(timeout=30)
            assert final.started_at is not None
            delays.append((final.started_at - sent).total_seconds() * 1000)
    await worker_store.close()
    await drop(client_store)
    await client_store.close()
    delays.sort()
    return statistics.median(delays), delays[int(len(delays) * 0.99) - 1]


_PGQ_SWEEP = ((1, 32), (1, 100), (1, 500), (2, 100))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--max-parallel", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per-call", action="store_true", help="concurrent enqueue calls")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-processes", action="store_true")
    options = parser.parse_args()
    n, chunk = options.n, options.chunk
    how = "concurrent enqueue calls" if options.per_call else "enqueue_many"
    print(f"enqueue {n:,} trivial tasks ({how}, {chunk} at a time), then drain, full audit trail:")
    if not options.no_sqlite:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "queue.db"

            def sqlite(_: object = None, __: str = "") -> TaskStore:
                return SqliteTaskStore(path)

            enq, drain, cpu, _ = asyncio.run(
                enqueue_and_drain(sqlite, n, chunk, options.max_parallel, options.per_call)
            )
            print(
                f"  SQLite      in-process worker: enqueue {enq:>7,.0f}/s  drain {drain:>7,.0f}/s"
                f"  ({_us(cpu, n)} µs CPU/task here)"
            )
            path.unlink()
            if not options.no_processes:
                enq, rate = asyncio.run(
                    drain_with_processes(sqlite, ["--db", str(path)], n, chunk, workers=2)
                )
                print(
                    f"  SQLite      2 worker processes: enqueue {enq:>7,.0f}/s"
                    f"  drain {rate:>7,.0f}/s"
                )
    if options.no_postgres:
        return 0
    schema = "bench_q_" + secrets.token_hex(4)

    def postgres(_: object = None, app: str = "chongming") -> TaskStore:
        from chongming.stores.postgres import PostgresTaskStore

        return PostgresTaskStore(DSN, schema=schema, application_name=app)

    for round_number in range(1, options.rounds + 1):
        print(f"round {round_number}: load average {os.getloadavg()[0]:.1f}")
        enq, drain, cpu, server = asyncio.run(
            enqueue_and_drain(postgres, n, chunk, options.max_parallel, options.per_call)
        )
        ours = cpu + (server or 0.0)
        print(
            f"  PostgreSQL  in-process worker: enqueue {enq:>7,.0f}/s  drain {drain:>7,.0f}/s"
            f"  CPU/task {_us(cpu, n)} µs here + {_us(server, n)} µs server"
        )
        best: tuple[float, float, float, str] | None = None
        pgq_enqueues = []
        for consumers, batch in _PGQ_SWEEP:
            pgq_enq, pgq_drain, pgq_cpu, pgq_server = asyncio.run(
                pgqueuer_round(n, consumers, batch)
            )
            label = f"{consumers} x batch {batch}"
            print(
                f"  pgqueuer    {label:<15} enqueue {pgq_enq:>7,.0f}/s  drain {pgq_drain:>7,.0f}/s"
                f"  CPU/task {_us(pgq_cpu, n)} µs here + {_us(pgq_server, n)} µs server"
            )
            pgq_enqueues.append(pgq_enq)
            if best is None or pgq_drain > best[0]:
                best = (pgq_drain, pgq_cpu + pgq_server, pgq_enq, label)
        assert best is not None
        cpu_ratio = "n/a" if server is None else f"{ours / best[1]:.2f}x"
        print(
            f"  ratio vs pgqueuer's best ({best[3]}): drain {drain / best[0]:.2f}x (goal >= 1.0),"
            f" CPU per drained task {cpu_ratio} (goal <= 1.3); enqueue"
            f" {enq / statistics.median(pgq_enqueues):.2f}x its median bulk enqueue (goal >= 0.5)"
        )
    if not options.no_processes:
        for workers in (1, 2):
            pg_options = ["--db", DSN, "--schema", schema]
            enq, rate = asyncio.run(drain_with_processes(postgres, pg_options, n, chunk, workers))
            label = f"{workers} worker process{'es' if workers > 1 else ''}:"
            print(f"  PostgreSQL  {label:<19} enqueue {enq:>7,.0f}/s  drain {rate:>7,.0f}/s")
    p50 = asyncio.run(single_enqueue_latency(postgres, 200))
    floor = asyncio.run(commit_latency(200))
    print(
        f"  PostgreSQL  one enqueue call at a time: p50 {p50:.2f} ms (goal <= 2 ms;"
        f" a bare one-row INSERT's commit here: p50 {floor:.2f} ms)"
    )
    p50, p99 = asyncio.run(start_latency(postgres, 100))
    print(f"  PostgreSQL  enqueue -> start on an idle worker: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
