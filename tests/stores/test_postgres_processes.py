"""Multi-process proofs with real OS processes on the PostgreSQL store.

Each worker is a fresh ``python -c`` process; every wait is bounded and every
process is killed at the end whatever happens.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming.testing.store_contract import make_snapshot
from tests.stores.pg_support import (
    PgStoreFactory,
    admin_connection,
    finish,
    require_postgres,
    spawn_script,
)
from tests.tiers import proof_scale

pytestmark = pytest.mark.postgres

#: Multiplies the load of the slow proofs (1.0 = the pass marks, ``make proofs``).
SCALE = proof_scale("CHONGMING_FAULT_SCALE", reduced=0.1)

_PRELUDE = """
import asyncio, sys, time
from pathlib import Path
from chongming.stores.postgres import PostgresTaskStore
dsn, schema, app, index, workdir = sys.argv[1:6]
workdir = Path(workdir)

def store(**options):
    return PostgresTaskStore(
        dsn, schema=schema, application_name=app, min_size=1, max_size=2, **options
    )

def wait_for_go():
    (workdir / f"ready-{index}").touch()
    deadline = time.monotonic() + 60
    while not (workdir / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.005)
"""


@pytest.fixture
async def factory() -> AsyncIterator[PgStoreFactory]:
    made = PgStoreFactory(require_postgres())
    yield made
    await made.cleanup()


async def _wait_files(
    paths: list[Path], processes: list[subprocess.Popen[str]], timeout: float
) -> None:
    """Bounded wait for marker files; a worker that died early fails the test at once."""
    deadline = time.monotonic() + timeout
    while not all(path.exists() for path in paths):
        for process in processes:
            if process.poll() is not None and process.returncode != 0:
                error = process.stderr.read() if process.stderr is not None else ""
                raise AssertionError(f"worker exited {process.returncode}: {error}")
        assert time.monotonic() < deadline, "workers did not get ready in time"
        await asyncio.sleep(0.02)


def _spawn(
    source: str, factory: PgStoreFactory, schema: str, workdir: Path, count: int
) -> list[subprocess.Popen[str]]:
    return [
        spawn_script(
            _PRELUDE + source,
            factory.dsn,
            schema,
            factory.application_name,
            str(i),
            str(workdir),
        )
        for i in range(count)
    ]


async def _kill_all(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
    for process in processes:
        await asyncio.to_thread(process.wait, 10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.slow
async def test_concurrent_saves_from_processes_have_one_winner(
    factory: PgStoreFactory, tmp_path: Path
) -> None:
    store = factory.make()
    schema = factory.schemas[-1]
    await store.create(make_snapshot("contended"))
    worker = """
from chongming.errors import VersionConflict
from chongming.testing.store_contract import make_snapshot, next_step
from chongming.state.status import TaskStatus

async def main():
    async with store() as s:
        await s.open()
        new, transition = next_step(
            make_snapshot("contended"), TaskStatus.QUEUED, owner=f"p{index}"
        )
        wait_for_go()
        try:
            await s.save(new, expect_version=0, transitions=[transition])
        except VersionConflict:
            print("conflict")
        else:
            print("won")

asyncio.run(main())
"""
    processes = _spawn(worker, factory, schema, tmp_path, 6)
    try:
        await _wait_files([tmp_path / f"ready-{i}" for i in range(6)], processes, 60)
        (tmp_path / "go").touch()
        results = await asyncio.to_thread(finish, processes, 60)
    finally:
        await _kill_all(processes)
    outputs = [out.strip() for _, out, _ in results]
    assert all(code == 0 for code, _, _ in results), results
    assert sorted(outputs) == ["conflict"] * 5 + ["won"], outputs
    winner = outputs.index("won")
    stored = await store.get("contended")
    assert stored is not None
    assert (stored.status_version, stored.owner) == (1, f"p{winner}")
    assert len(await store.history("contended")) == 1


@pytest.mark.slow
@pytest.mark.proof
async def test_eight_processes_claim_every_command_exactly_once(
    factory: PgStoreFactory, tmp_path: Path
) -> None:
    total = max(100, int(20_000 * SCALE))
    store = factory.make()
    schema = factory.schemas[-1]
    await store.open()
    created = datetime.now(UTC)
    async with admin_connection() as conn:
        await conn.copy_records_to_table(
            "commands",
            schema_name=schema,
            columns=["command_id", "task_id", "kind", "created_at", "actor"],
            records=[
                (f"cmd-{i:06d}", f"task-{i % 97}", "stop", created + timedelta(microseconds=i), "u")
                for i in range(total)
            ],
        )
    worker = """
async def main():
    claimed = []
    async with store() as s:
        await s.open()
        wait_for_go()
        while True:
            batch = await s.claim_commands(f"p{index}", lease_seconds=120, limit=100)
            if not batch:
                break
            for command in batch:
                if not await s.complete_command(command.command_id, f"p{index}"):
                    sys.exit(f"lost the lease of {command.command_id}")
                claimed.append(command.command_id)
    (workdir / f"claimed-{index}").write_text("\\n".join(claimed))
    print(len(claimed))

asyncio.run(main())
"""
    processes = _spawn(worker, factory, schema, tmp_path, 8)
    try:
        await _wait_files([tmp_path / f"ready-{i}" for i in range(8)], processes, 60)
        started = time.monotonic()
        (tmp_path / "go").touch()
        results = await asyncio.to_thread(finish, processes, 120)
        elapsed = time.monotonic() - started
    finally:
        await _kill_all(processes)
    assert all(code == 0 for code, _, _ in results), results
    claims: list[str] = []
    per_process = []
    for i in range(8):
        text = (tmp_path / f"claimed-{i}").read_text()
        ids = text.split("\n") if text else []
        per_process.append(len(ids))
        claims.extend(ids)
    duplicates = len(claims) - len(set(claims))
    missing = total - len(set(claims))
    print(f"{total} commands, 8 processes, {elapsed:.2f}s, per process {per_process}")
    assert (duplicates, missing) == (0, 0)
    async with admin_connection() as conn:
        open_left = await conn.fetchval(
            f'SELECT count(*) FROM "{schema}".commands WHERE completed_at IS NULL'
        )
        mismatched = await conn.fetchval(
            f'SELECT count(*) FROM "{schema}".commands'
            " WHERE completed_by IS DISTINCT FROM claimed_by"
        )
    assert (open_left, mismatched) == (0, 0)
    assert sum(1 for n in per_process if n > 0) >= 2, "the claims were spread over processes"


@pytest.mark.slow
async def test_a_killed_lease_holder_lets_another_process_claim(
    factory: PgStoreFactory, tmp_path: Path
) -> None:
    store = factory.make()
    schema = factory.schemas[-1]
    from chongming.stores.nodes import Command, CommandKind

    await store.submit_command(
        Command(command_id="c", task_id="t", kind=CommandKind.STOP, created_at=datetime.now(UTC))
    )
    lease = 2.0
    holder = f"""
async def main():
    s = store()
    await s.open()
    (claimed,) = await s.claim_commands("holder", lease_seconds={lease})
    (workdir / "claimed").write_text(claimed.command_id)
    await asyncio.sleep(120)  # holds the lease until SIGKILL

asyncio.run(main())
"""
    (process,) = _spawn(holder, factory, schema, tmp_path, 1)
    try:
        await _wait_files([tmp_path / "claimed"], [process], 60)
        claimed_at = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        await asyncio.to_thread(process.wait, 10)
        assert process.returncode == -signal.SIGKILL
    finally:
        await _kill_all([process])
    # Another process (this one) cannot take it while the lease runs...
    assert await store.claim_commands("rescuer", lease_seconds=30) == []
    # ...and gets it once the lease expired, by the server's clock.
    deadline = time.monotonic() + lease + 10
    while True:
        rescued = await store.claim_commands("rescuer", lease_seconds=30)
        if rescued or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    waited = time.monotonic() - claimed_at
    assert [(c.command_id, c.claimed_by) for c in rescued] == [("c", "rescuer")]
    assert waited >= lease - 0.5, waited
    assert await store.complete_command("c", "rescuer")
