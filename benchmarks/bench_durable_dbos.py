"""The same 10-step durable workflow on chongming and on DBOS, same PostgreSQL, one process run.

    python benchmarks/bench_durable_dbos.py [--n 200] [--concurrency 20] [--rounds 3]
                                            [--poll 0.05] [--postgres DSN] [--pairing ...]

DBOS 3.4 is a benchmark-only dependency (``pip install -e '.[bench]'``); without
it this prints a note and exits 0. ``--n`` defaults to ``CHONGMING_BENCH_DBOS_N``
(200), the server to ``CHONGMING_TEST_POSTGRES`` (127.0.0.1:5432).

A workflow is ten steps, each an async function doing a trivial computation;
each step's result is committed to PostgreSQL before the next step starts, on
both systems. Three pairings, each measured on both:

- ``queue``: N workflows enqueued by name, run by a worker in this process.
  chongming: ``Controller(store=PostgresTaskStore, work=True,
  max_parallel=C)`` running a task registered ``durable=True`` whose steps
  are ``ctx.step``; enqueued with ``enqueue``. DBOS: an async
  ``@DBOS.workflow()`` of ten ``@DBOS.step()`` calls, enqueued with
  ``Queue.enqueue_async`` on a queue registered with ``worker_concurrency=C``.
  Both poll for work every ``--poll`` seconds (DBOS's default is 1 s, which
  would dominate its figure); chongming's worker also claims when a slot
  frees and on an enqueue's NOTIFY, DBOS's queue thread only polls.
- ``effects``: the same, each step also inserting one row into a side table
  in the same database, exactly once. chongming: ``ctx.effect(..., commit=)``
  (intent row, then the insert, the ledger row and the fencing check in one
  transaction); DBOS: an ``AsyncSQLAlchemyDatasource.transaction()`` step
  (its checkpoint row and the insert in one transaction), READ COMMITTED like
  chongming's (DBOS's default is SERIALIZABLE).
- ``direct``: no queue. chongming: ``submit`` on a controller with the store
  that serves no queue (``work=False``; the task is written through to the
  store, its steps recorded); DBOS: ``DBOS.start_workflow_async`` with no
  queue registered. At most C in flight on both (chongming's admission, a
  semaphore for DBOS).

Pools at their defaults: chongming asyncpg, at most 10; DBOS SQLAlchemy on
psycopg, 20, pre-pinged.

Each system runs in a throwaway database of its own (``chongming_bench_*``,
dropped afterwards; DBOS's system database and its datasource tables share
it), created fresh for every run, in a fresh event loop, with C workflows run
first to open the pools (not timed). The timed part goes from the first
enqueue (or start) to the moment the database shows all N finished (one
``count(*)`` every 20 ms over a connection of its own). Round 0 is a discarded
warm-up; then ``--rounds`` rounds, the two systems alternating which goes
first. Reported: workflows/s (best and median), wall time per step
(elapsed / 10 N, at concurrency C), CPU per step of this process (all its
threads) and of the server processes of the run's database (``/proc``, a
local server only), and the ratio chongming / DBOS of the median rates.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chongming import Controller, EffectInfo, TaskContext
from chongming.state.status import TERMINAL_STATUSES

DSN = os.environ.get("CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
STEPS = 10
PAIRINGS = ("queue", "effects", "direct")
_TERMINAL = ", ".join(sorted(f"'{status.value}'" for status in TERMINAL_STATUSES))
SIDE_TABLE = "CREATE TABLE side (wf integer, step integer, PRIMARY KEY (wf, step))"


def compute(n: int) -> int:
    """The trivial computation every step does, on both systems."""
    return (n * 2654435761) % 1_000_003


@dataclass
class Run:
    """One timed run: N workflows on one system."""

    elapsed: float
    cpu: float
    server_cpu: float | None  # the backends of this run's database; None if not readable


# ---------------------------------------------------------------- databases


def _database_dsn(name: str) -> str:
    base, _, _ = DSN.rpartition("/")
    return f"{base}/{name}"


@contextlib.asynccontextmanager
async def throwaway_database(name: str, side_table: bool) -> AsyncIterator[str]:
    import asyncpg  # type: ignore[import-untyped]

    admin = await asyncpg.connect(DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
        dsn = _database_dsn(name)
        if side_table:
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute(SIDE_TABLE)
            finally:
                await conn.close()
        try:
            yield dsn
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


class Probe:
    """How many workflows the database shows finished: one count(*) per look."""

    def __init__(self, dsn: str, query: str) -> None:
        self._dsn, self._query = dsn, query
        self._conn: Any = None

    async def __aenter__(self) -> Probe:
        import asyncpg

        self._conn = await asyncpg.connect(self._dsn)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._conn.close()

    async def finished(self) -> int:
        count: int = await self._conn.fetchval(self._query)
        return count

    async def wait_for(self, total: int, timeout: float = 600) -> None:
        async with asyncio.timeout(timeout):
            while await self.finished() < total:
                await asyncio.sleep(0.02)

    async def fetchval(self, query: str) -> Any:
        return await self._conn.fetchval(query)

    async def backend_cpu(self) -> dict[int, float] | None:
        """CPU seconds so far of each server process on this database (a local server only)."""
        if urlsplit(self._dsn).hostname not in ("127.0.0.1", "localhost", "::1"):
            return None
        pids = await self._conn.fetch(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return _proc_cpu([row["pid"] for row in pids])


def _proc_cpu(pids: list[int]) -> dict[int, float] | None:
    found = {}
    try:
        for pid in pids:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rpartition(")")[2].split()
                found[pid] = (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime
    except OSError:
        return None  # not this machine's server, or no /proc
    return found


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


async def timed(probe: Probe, start: Callable[[], Awaitable[None]], total: int) -> Run:
    """Wall, process and server CPU seconds from ``start()`` until ``total`` are finished.

    Server CPU: the backends of the run's database alive at the end (one that
    exited meanwhile is missed; the pools keep theirs), less what they had used
    at the start.
    """
    server = await probe.backend_cpu()
    cpu, began = time.process_time(), time.perf_counter()
    await start()
    await probe.wait_for(total)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    after = await probe.backend_cpu()
    used = None
    if server is not None and after is not None:
        used = sum(seconds - server.get(pid, 0.0) for pid, seconds in after.items())
    return Run(elapsed, cpu, used)


# ---------------------------------------------------------------- chongming


async def cm_step(n: int) -> int:
    return compute(n)


async def cm_ten_steps(ctx: TaskContext, seed: int) -> int:
    total = 0
    for k in range(STEPS):
        total += await ctx.step("step", cm_step, seed * STEPS + k)
    return total


async def cm_row(info: EffectInfo, seed: int, k: int) -> dict[str, int]:
    return {"wf": seed, "step": k, "value": compute(seed * STEPS + k)}


async def cm_insert(conn: Any, result: dict[str, int]) -> None:
    await conn.execute("INSERT INTO side (wf, step) VALUES ($1, $2)", result["wf"], result["step"])


async def cm_ten_effects(ctx: TaskContext, seed: int) -> int:
    total = 0
    for k in range(STEPS):
        row = await ctx.effect(f"row:{k}", cm_row, seed, k, commit=cm_insert)
        total += row["value"]
    return total


async def chongming_run(pairing: str, n: int, concurrency: int, poll: float) -> Run:
    from chongming.stores.postgres import PostgresTaskStore

    name = "cm_effects" if pairing == "effects" else "cm_steps"
    async with throwaway_database(f"chongming_bench_cm_{os.getpid()}", pairing == "effects") as dsn:
        store = PostgresTaskStore(dsn, schema="chongming")
        worker = Controller(
            store=store,
            owner="bench-worker",
            work=pairing != "direct",  # direct: no queue to poll, like DBOS without a Queue
            max_parallel=concurrency,
            poll_interval=poll,
            keep_finished=100,
        )
        worker.register("cm_steps", cm_ten_steps, durable=True)
        worker.register("cm_effects", cm_ten_effects, durable=True)
        query = f"SELECT count(*) FROM chongming.tasks WHERE status IN ({_TERMINAL})"

        async def launch(first: int, count: int) -> None:
            if pairing == "direct":
                for seed in range(first, first + count):
                    await worker.submit(name, seed)
            else:
                await asyncio.gather(
                    *(worker.enqueue(name, seed) for seed in range(first, first + count))
                )

        async with worker, Probe(dsn, query) as probe:
            await launch(0, concurrency)  # opens the pools: not timed
            await probe.wait_for(concurrency)
            run = await timed(probe, lambda: launch(concurrency, n), concurrency + n)
            total = concurrency + n
            succeeded = await probe.fetchval(
                "SELECT count(*) FROM chongming.tasks WHERE status = 'succeeded'"
            )
            assert succeeded == total, f"chongming {pairing}: {succeeded} of {total} succeeded"
            if pairing == "effects":
                rows = await probe.fetchval("SELECT count(*) FROM side")
                ledger = await probe.fetchval(
                    "SELECT count(*) FROM chongming.durable_effects WHERE state = 'done'"
                )
                assert rows == ledger == total * STEPS, (rows, ledger)
            else:
                steps = await probe.fetchval("SELECT count(*) FROM chongming.durable_steps")
                assert steps == total * STEPS, f"chongming {pairing}: {steps} steps recorded"
            await worker.close(close_store=True)
    return run


# ---------------------------------------------------------------- DBOS

DBOS_STATE: dict[str, Any] = {}


def define_dbos() -> None:
    """Register the DBOS workflows once per process (DBOS keeps a global registry)."""
    import sqlalchemy as sa
    from dbos import DBOS

    @DBOS.step()
    async def dbos_step(n: int) -> int:
        return compute(n)

    @DBOS.workflow()
    async def dbos_ten_steps(seed: int) -> int:
        total = 0
        for k in range(STEPS):
            total += await dbos_step(seed * STEPS + k)
        return total

    insert = sa.text("INSERT INTO public.side (wf, step) VALUES (:wf, :step)")

    async def dbos_insert(seed: int, k: int) -> int:
        # the datasource of this run (each run has a database of its own)
        await DBOS_STATE["datasource"].sql_session().execute(insert, {"wf": seed, "step": k})
        return compute(seed * STEPS + k)

    @DBOS.workflow()
    async def dbos_ten_effects(seed: int) -> int:
        total = 0
        for k in range(STEPS):
            total += await DBOS_STATE["transaction"](seed, k)
        return total

    DBOS_STATE.update(steps=dbos_ten_steps, effects=dbos_ten_effects, insert_body=dbos_insert)


async def dbos_run(pairing: str, n: int, concurrency: int, poll: float) -> Run:
    from dbos import DBOS, AsyncSQLAlchemyDatasource

    workflow = DBOS_STATE["effects" if pairing == "effects" else "steps"]
    queue_name = "bench"
    database = f"chongming_bench_dbos_{os.getpid()}"
    async with throwaway_database(database, pairing == "effects") as dsn:
        config: Any = {
            "name": "chongming-bench",
            "system_database_url": dsn,
            "log_level": "WARNING",
        }
        DBOS(config=config)
        datasource = None
        try:
            if pairing == "effects":
                datasource = await AsyncSQLAlchemyDatasource.create(dsn, schema="dbos_app")
                DBOS_STATE["datasource"] = datasource
                DBOS_STATE["transaction"] = datasource.transaction(
                    name="insert_row", isolation_level="READ COMMITTED"
                )(DBOS_STATE["insert_body"])
            DBOS.launch()
            queue: Any = None
            if pairing != "direct":
                queue = await DBOS.register_queue_async(
                    queue_name, worker_concurrency=concurrency, polling_interval_sec=poll
                )
                # DBOS's queue thread looks for new queues once a second: wait for its worker.
                async with asyncio.timeout(30):
                    while not any(
                        t.name == f"queue-worker-{queue_name}" for t in threading.enumerate()
                    ):
                        await asyncio.sleep(0.05)
            gate = asyncio.Semaphore(concurrency)
            tasks: list[asyncio.Task[Any]] = []

            async def direct(seed: int) -> None:
                async with gate:
                    handle = await DBOS.start_workflow_async(workflow, seed)
                    await handle.get_result()

            async def launch(first: int, count: int) -> None:
                if pairing == "direct":
                    tasks.extend(
                        asyncio.create_task(direct(seed)) for seed in range(first, first + count)
                    )
                else:
                    seeds = range(first, first + count)
                    await asyncio.gather(*(queue.enqueue_async(workflow, seed) for seed in seeds))

            query = (
                "SELECT count(*) FROM dbos.workflow_status"
                " WHERE status NOT IN ('ENQUEUED', 'PENDING', 'DELAYED')"
            )
            async with Probe(dsn, query) as probe:
                await launch(0, concurrency)  # opens the pools: not timed
                await probe.wait_for(concurrency)
                run = await timed(probe, lambda: launch(concurrency, n), concurrency + n)
                await asyncio.gather(*tasks)
                total = concurrency + n
                succeeded = await probe.fetchval(
                    "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'"
                )
                assert succeeded == total, f"DBOS {pairing}: {succeeded} of {total} succeeded"
                steps = await probe.fetchval("SELECT count(*) FROM dbos.operation_outputs")
                assert steps == total * STEPS, f"DBOS {pairing}: {steps} steps recorded"
                if pairing == "effects":
                    rows = await probe.fetchval("SELECT count(*) FROM public.side")
                    assert rows == total * STEPS, f"DBOS effects: {rows} rows"
        finally:
            DBOS.destroy(workflow_completion_timeout_sec=0)
            if datasource is not None:
                await datasource.engine.dispose()
            DBOS_STATE.pop("datasource", None)
            DBOS_STATE.pop("transaction", None)
    return run


# ---------------------------------------------------------------- report

SYSTEMS: dict[str, Callable[[str, int, int, float], Awaitable[Run]]] = {
    "chongming": chongming_run,
    "DBOS": dbos_run,
}
LABELS = {
    ("queue", "chongming"): "enqueue + worker, ctx.step",
    ("queue", "DBOS"): "Queue.enqueue_async, @DBOS.step",
    ("effects", "chongming"): "enqueue + worker, ctx.effect(commit=)",
    ("effects", "DBOS"): "Queue, datasource.transaction()",
    ("direct", "chongming"): "submit, ctx.step",
    ("direct", "DBOS"): "start_workflow_async, @DBOS.step",
}


def measure(pairing: str, n: int, concurrency: int, poll: float, rounds: int) -> None:
    runs: dict[str, list[Run]] = {system: [] for system in SYSTEMS}
    for index in range(rounds + 1):
        order = list(SYSTEMS) if index % 2 == 0 else list(reversed(SYSTEMS))
        for system in order:
            run = asyncio.run(SYSTEMS[system](pairing, n, concurrency, poll))
            if index > 0:  # round 0 warms the process up
                runs[system].append(run)
    medians = {}
    per_step = n * STEPS / 1e6  # seconds -> µs per step
    for system, found in runs.items():
        rates = sorted(n / run.elapsed for run in found)
        medians[system] = statistics.median(rates)
        wall = statistics.median(run.elapsed for run in found) / per_step
        cpu = statistics.median(run.cpu for run in found) / per_step
        servers = [run.server_cpu for run in found if run.server_cpu is not None]
        server = f"{statistics.median(servers) / per_step:>6,.0f}" if servers else "   n/a"
        print(
            f"  {pairing:<8} {system:<9} {LABELS[pairing, system]:<37}"
            f" best {rates[-1]:>5,.1f}  median {medians[system]:>5,.1f} wf/s"
            f"  per step: {wall:>6,.0f} µs wall, CPU {cpu:>6,.0f} µs here + {server} µs server",
            flush=True,
        )
    print(
        f"  ratio {pairing}: chongming / DBOS = {medians['chongming'] / medians['DBOS']:.2f}x"
        " (median workflows/s)",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=int(os.environ.get("CHONGMING_BENCH_DBOS_N", 200)))
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--poll", type=float, default=0.05)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--pairing", choices=PAIRINGS, action="append")
    options = parser.parse_args()
    if options.postgres:
        global DSN
        DSN = options.postgres
    if importlib.util.find_spec("dbos") is None:
        print("dbos is not installed (pip install -e '.[bench]'): the comparison is skipped")
        return 0
    define_dbos()
    print(
        f"{options.n} workflows of {STEPS} steps, at most {options.concurrency} in flight on each,"
        f" poll {options.poll} s; chongming {_version('chongming')}, DBOS {_version('dbos')};"
        f" best/median of {options.rounds} rounds after a warm-up"
        f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):",
        flush=True,
    )
    for pairing in options.pairing or PAIRINGS:
        measure(pairing, options.n, options.concurrency, options.poll, options.rounds)
    return 0


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    sys.exit(main())
