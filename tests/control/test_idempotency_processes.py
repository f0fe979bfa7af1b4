"""Eight processes race one idempotency key: one task, whatever the timing.

Every process waits for the same wall-clock instant, then enqueues under the
key ``race``. With the same input all get the same task (one ``created``);
with different input one wins and the seven others get ``IdempotencyConflict``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from chongming import Controller, TaskQuery
from tests.stores.pg_support import DSN, drop_schema, fresh_name, require_postgres

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 8

SCRIPT = """
import asyncio, sys, time
from chongming import Controller, IdempotencyConflict

kind, where, schema, at, value = sys.argv[1:6]

async def main():
    if kind == "sqlite":
        store = where
    else:
        from chongming.stores.postgres import PostgresTaskStore
        store = PostgresTaskStore(where, schema=schema)
    async with Controller(store=store, owner="p") as client:
        await client.store.open()
        time.sleep(max(0.0, float(at) - time.time()))  # everyone starts together
        try:
            queued = await client.enqueue("ship", value, idempotency_key="race")
            print("created" if queued.created else "existing", queued.task_id)
        except IdempotencyConflict as error:
            print("conflict", error.task_id)
        await client.close(close_store=True)

asyncio.run(main())
"""


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "race.db"), "-"
        return
    require_postgres()
    schema = fresh_name("race")
    try:
        yield "postgres", DSN, schema
    finally:
        asyncio.run(drop_schema(schema))


def _race(where: tuple[str, str, str], same_input: bool) -> list[list[str]]:
    at = time.time() + 2.5
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, *where, str(at), "same" if same_input else str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in range(PROCESSES)
    ]
    answers = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        answers.append(out.split())
    return answers


async def _stored(where: tuple[str, str, str]) -> list[str]:
    kind, location, schema = where
    if kind == "sqlite":
        store: object = location
    else:
        from chongming.stores.postgres import PostgresTaskStore

        store = PostgresTaskStore(location, schema=schema)
    async with Controller(store=store) as reader:  # type: ignore[arg-type]
        found = [t.task_id for t in await reader.list_tasks(TaskQuery())]
        await reader.close(close_store=True)
    return found


async def test_same_input_gives_every_racer_the_one_task(where: tuple[str, str, str]) -> None:
    answers = await asyncio.to_thread(_race, where, True)
    assert Counter(kind for kind, _ in answers) == {"created": 1, "existing": PROCESSES - 1}
    assert len({task_id for _, task_id in answers}) == 1
    assert await _stored(where) == [answers[0][1]]


async def test_different_input_gives_one_task_and_conflicts(where: tuple[str, str, str]) -> None:
    answers = await asyncio.to_thread(_race, where, False)
    assert Counter(kind for kind, _ in answers) == {"created": 1, "conflict": PROCESSES - 1}
    winner = next(task_id for kind, task_id in answers if kind == "created")
    assert {task_id for _, task_id in answers} == {winner}  # conflicts name the winner's task
    assert await _stored(where) == [winner]
