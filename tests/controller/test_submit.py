"""Submit: accepted means queued; bad input means a typed error and nothing queued."""

from __future__ import annotations

import asyncio

import pytest

from chongming import (
    BucketNotOwned,
    ConfigurationError,
    Controller,
    ControllerClosed,
    DuplicateTask,
    PayloadError,
    TaskStatus,
)

S = TaskStatus


async def echo(ctx, value: object = None) -> object:  # type: ignore[no-untyped-def]
    return value


async def blocked(ctx, gate: str) -> str:  # type: ignore[no-untyped-def]
    await GATES[gate].wait()
    return gate


GATES: dict[str, asyncio.Event] = {}


async def test_submit_returns_a_queued_run_with_its_snapshot() -> None:
    async with Controller(max_parallel=1) as controller:
        controller.register("echo", echo)
        run = await controller.submit("echo", {"a": [1, 2]}, task_id="job-1", label="回声")
        assert run.status in (S.QUEUED, S.STARTING)
        assert (run.snapshot.name, run.snapshot.label, run.snapshot.owner) == (
            "echo",
            "回声",
            controller.owner,
        )
        outcome = await run.wait(5)
        assert outcome.value == {"a": [1, 2]}
        assert (await controller.get("job-1")).status is S.SUCCEEDED
        history = await controller.history("job-1")
        assert [t.to_status for t in history] == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


async def test_generated_ids_are_unique() -> None:
    async with Controller() as controller:
        controller.register("echo", echo)
        runs = [await controller.submit("echo") for _ in range(200)]
        assert len({run.task_id for run in runs}) == 200
        await controller.wait_all(5)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"task_id": ""}, PayloadError),
        ({"task_id": "x" * 201}, PayloadError),
        ({"task_id": "a\x00b"}, PayloadError),
        ({"task_id": "a\tb"}, PayloadError),
        ({"label": "x" * 257}, PayloadError),
        ({"bucket_key": 7}, PayloadError),
        ({"priority": "high"}, ConfigurationError),
        ({"tags": "io"}, ConfigurationError),
        ({"value": object()}, PayloadError),
        ({"value": float("nan")}, PayloadError),
        ({"value": {1, 2}}, PayloadError),
        ({"nonsense": 1}, ConfigurationError),
    ],
)
async def test_bad_input_is_refused_before_anything_is_queued(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    async with Controller() as controller:
        controller.register("echo", echo)
        with pytest.raises(error):
            await controller.submit("echo", **kwargs)  # type: ignore[arg-type]
        stats = await controller.stats()
        assert (stats.total, stats.queued, stats.holding_slot) == (0, 0, 0)


async def test_duplicate_ids_are_refused() -> None:
    async with Controller() as controller:
        controller.register("echo", echo)
        first = await controller.submit("echo", 1, task_id="same")
        await first.wait(5)
        with pytest.raises(DuplicateTask):
            await controller.submit("echo", 2, task_id="same")
        assert (await controller.get("same")).result == 1


async def test_buckets_the_node_does_not_own_are_refused_at_submit() -> None:
    async with Controller(num_buckets=64, owned_buckets=range(16)) as controller:
        controller.register("echo", echo)
        run = await controller.submit("echo", bucket_key="tenant-A")  # bucket 7
        assert run.snapshot.bucket == 7
        assert run.snapshot.bucket_key == "tenant-A"
        with pytest.raises(BucketNotOwned, match="bucket 28 is not owned") as caught:
            await controller.submit("echo", bucket_key="tenant-B")  # bucket 28
        assert caught.value.bucket == 28
        assert "0-15" in str(caught.value)
        await controller.wait_all(5)
        assert (await controller.stats()).total == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_parallel": 0},
        {"max_parallel": -1},
        {"max_parallel_per_bucket": 0},
        {"resource_limits": {"io": 0}},
        {"resource_limits": {"io": -2}},
        {"num_buckets": 0},
        {"owned_buckets": [64]},
        {"owned_buckets": []},
        {"owned_buckets": "0-15"},
        {"owner": ""},
        {"keep_finished": -1},
    ],
)
def test_bad_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Controller(**kwargs)  # type: ignore[arg-type]


async def test_use_after_close() -> None:
    controller = Controller()
    controller.register("echo", echo)
    await controller.start()
    await controller.close()
    await controller.close()  # idempotent
    with pytest.raises(ControllerClosed):
        await controller.submit("echo")
    with pytest.raises(ControllerClosed):
        await controller.start()
    for call in (
        controller.list_tasks(),
        controller.stats(),
        controller.get("x"),
        controller.stop_all(),
        controller.wait_all(),
    ):
        with pytest.raises(ControllerClosed):
            await call
    with pytest.raises(ControllerClosed):
        controller.register("late", echo)


async def test_wait_all_bad_and_short_timeouts() -> None:
    GATES["w"] = asyncio.Event()
    async with Controller() as controller:
        controller.register("blocked", blocked)
        run = await controller.submit("blocked", "w")
        with pytest.raises(ConfigurationError):
            await controller.wait_all(timeout=-1)
        with pytest.raises(TimeoutError):
            await controller.wait_all(timeout=0.05)
        assert not run.done
        GATES["w"].set()
        outcomes = await controller.wait_all(timeout=5)
        assert [o.value for o in outcomes] == ["w"]


async def test_payload_cap_is_configurable() -> None:
    async with Controller(max_payload_bytes=100) as controller:
        controller.register("echo", echo)
        with pytest.raises(PayloadError, match="100-byte limit"):
            await controller.submit("echo", "x" * 200)
        run = await controller.submit("echo", "x" * 50)
        assert (await run.wait(5)).value == "x" * 50
    with pytest.raises(ConfigurationError):
        Controller(max_payload_bytes=0)
