"""Worker pools: ``Controller(work=True, pool=WorkerPool(names=, tags=, ...))``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, TaskStatus
from chongming.controller.pools import WorkerPool
from tests.conftest import FAST


async def _noop(ctx: Any) -> str:
    return str(ctx.task_id)


def _worker(db: Path, owner: str, **pool: Any) -> Controller:
    node = Controller(
        store=db,
        owner=owner,
        work=True,
        poll_interval=0.05,
        windows=FAST,
        max_parallel=4,
        pool=WorkerPool(**pool),
    )
    node.register("charge", _noop, tags=("payments",))
    node.register("report", _noop)
    node.register("mail", _noop, tags=("mail",))
    return node


def _client(db: Path) -> Controller:
    client = Controller(store=db, owner="client")
    client.register("charge", _noop, tags=("payments",))
    client.register("report", _noop)
    client.register("mail", _noop, tags=("mail",))
    return client


async def _owners(client: Controller, task_ids: list[str]) -> dict[str, str | None]:
    found = {}
    for task_id in task_ids:
        stored = await client.get(task_id)
        assert stored is not None
        assert stored.status is TaskStatus.SUCCEEDED
        found[task_id] = stored.owner
    return found


async def test_a_payments_pool_and_the_rest_of_the_fleet_split_the_queue(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with _client(db) as client:
        charges = [await client.enqueue("charge") for _ in range(6)]
        others = [await client.enqueue(name) for name in ("report", "mail") * 3]
        tagged = await client.enqueue("report", tags=("payments",))  # a tag of its own
        async with (
            _worker(db, "payments", tags=["payments"]),
            _worker(db, "general", exclude_tags=["payments"]),
        ):
            for task in [*charges, *others, tagged]:
                assert (await task.wait(timeout=20)).status is TaskStatus.SUCCEEDED
        owners = await _owners(client, [t.task_id for t in [*charges, *others, tagged]])
    assert {owners[t.task_id] for t in [*charges, tagged]} == {"payments"}
    assert {owners[t.task_id] for t in others} == {"general"}


async def test_names_and_versions_narrow_what_a_worker_claims(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    async with Controller(store=db, owner="client") as client:
        v1 = await client.enqueue("resize", version=1)
        v2 = await client.enqueue("resize", version=2)
        report = await client.enqueue("report")
        mail = await client.enqueue("mail")
        canary = Controller(
            store=db,
            owner="canary",
            work=True,
            poll_interval=0.05,
            windows=FAST,
            pool=WorkerPool(names=["resize", "report"], versions=["resize@2"]),
        )
        for version in (1, 2):
            canary.register("resize", _noop, version=version)
        canary.register("report", _noop)
        canary.register("mail", _noop)
        async with canary:
            for task in (v2, report):
                assert (await task.wait(timeout=20)).status is TaskStatus.SUCCEEDED
            served = {name for node in await client.store.nodes() for name in node.info.serves}  # type: ignore[union-attr]
        left = [await client.get(task.task_id) for task in (v1, mail)]
    assert {(s.status, s.owner) for s in left if s is not None} == {(TaskStatus.QUEUED, None)}
    assert served == {"resize@2", "report"}  # the node row says what it claims


@pytest.mark.parametrize(
    ("pool", "problem"),
    [
        ({"names": []}, "names is empty"),
        ({"tags": []}, "tags is empty"),
        ({"exclude_tags": ()}, "exclude_tags is empty"),
        ({"versions": []}, "versions is empty"),
        ({"names": "charge"}, "names must be a collection"),
        ({"names": [""]}, "names holds non-empty strings"),
        ({"tags": "payments"}, "tags: must be a collection"),
        ({"tags": ["a\x00"]}, "tags"),
        ({"versions": ["charge"]}, "versions: 'charge' is not 'name@N'"),
        ({"versions": ["charge@x"]}, "versions: 'charge@x'"),
        ({"versions": ["@2"]}, "versions: '@2'"),
        ({"versions": ["charge@-1"]}, "versions: 'charge@-1'"),
        ({"versions": "charge@2"}, "versions must be a collection"),
    ],
)
def test_bad_pool_filters_are_refused_when_the_controller_is_built(
    tmp_path: Path, pool: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        Controller(store=tmp_path / "q.db", work=True, pool=WorkerPool(**pool))
    assert not (tmp_path / "q.db").exists()  # nothing written, not even the file


def test_a_pool_needs_a_worker(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="work=True"):
        Controller(store=tmp_path / "q.db", pool=WorkerPool(tags=["payments"]))
    with pytest.raises(ConfigurationError, match="pool must be a WorkerPool"):
        Controller(store=tmp_path / "q.db", work=True, pool={"tags": ["payments"]})  # type: ignore[arg-type]
