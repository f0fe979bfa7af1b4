"""Bad arguments of ``ctx.step/effect/sleep/wait_for_fact`` are refused before anything runs.

Each bad call raises :class:`ConfigurationError` naming the argument; no step
body runs, nothing is recorded, and no wait begins (a fact name no
``signal()`` could send would otherwise wait out its whole timeout).
"""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path
from typing import Any

import pytest

from chongming import ConfigurationError, Controller, TaskStatus
from tests.conftest import FAST

RAN: list[str] = []


def _body() -> str:
    RAN.append("body")
    return "ran"


BAD_CALLS: list[tuple[str, str, Any]] = [
    # (what the error names, the call)
    ("step name 123", "step", lambda ctx: ctx.step(123, _body)),
    ("step name ''", "step", lambda ctx: ctx.step("", _body)),
    ("step name 'tab\\there'", "step", lambda ctx: ctx.step("tab\there", _body)),
    ("step name 'a\\x00b'", "step", lambda ctx: ctx.step("a\x00b", _body)),
    ("step name '\\udce9'", "step", lambda ctx: ctx.step("\udce9", _body)),
    ("step name 'xxx", "step", lambda ctx: ctx.step("x" * 201, _body)),
    ("fn must be a function", "step", lambda ctx: ctx.step("fine", 42)),
    ("op_key ''", "effect", lambda ctx: ctx.effect("", _body)),
    ("commit must be a function", "effect", lambda ctx: ctx.effect("op", _body, commit=1)),
    ("sleep name ''", "sleep", lambda ctx: ctx.sleep("", 1)),
    ("seconds must be a number >= 0", "sleep", lambda ctx: ctx.sleep("nap", math.nan)),
    ("seconds must be at most", "sleep", lambda ctx: ctx.sleep("nap", math.inf)),
    ("seconds must be at most", "sleep", lambda ctx: ctx.sleep("nap", 1e12)),
    ("seconds must be at most", "sleep", lambda ctx: ctx.sleep("nap", 10**400)),
    ("fact name 123", "wait_for_fact", lambda ctx: ctx.wait_for_fact(123, timeout=60)),
    ("fact name ''", "wait_for_fact", lambda ctx: ctx.wait_for_fact("", timeout=60)),
    ("fact name 'xxx", "wait_for_fact", lambda ctx: ctx.wait_for_fact("x" * 201)),
    (
        "timeout=None waits without a deadline",
        "wait_for_fact",
        lambda ctx: ctx.wait_for_fact("f", timeout=math.inf),
    ),
    (
        "timeout must be a number >= 0",
        "wait_for_fact",
        lambda ctx: ctx.wait_for_fact("f", timeout=-1),
    ),
    (
        "poll_interval must be a number > 0",
        "wait_for_fact",
        lambda ctx: ctx.wait_for_fact("f", poll_interval=0),
    ),
    (
        "poll_interval must be at most",
        "wait_for_fact",
        lambda ctx: ctx.wait_for_fact("f", poll_interval=math.inf),
    ),
    ("check must be a function", "wait_for_fact", lambda ctx: ctx.wait_for_fact("f", check="yes")),
]


async def test_every_bad_argument_is_refused_before_anything_runs(tmp_path: Path) -> None:
    refused: list[tuple[str, str]] = []

    async def tries_them_all(ctx: Any) -> str:
        loop = asyncio.get_running_loop()
        began = loop.time()
        for _, _, call in BAD_CALLS:
            try:
                await call(ctx)
            except ConfigurationError as error:
                refused.append((type(error).__name__, str(error)))
        assert loop.time() - began < 5  # none of them waited (each fact wait had 60 s)
        result: str = await ctx.step("fine", _body)
        return result

    async with Controller(store=tmp_path / "q.db", owner="w-1", windows=FAST) as controller:
        controller.register("tries_them_all", tries_them_all, durable=True)
        outcome = await (await controller.submit("tries_them_all", task_id="a-1")).wait()
        assert controller.store is not None
        steps = await controller.store.steps("a-1")
    assert outcome.status is TaskStatus.SUCCEEDED, outcome.failure
    assert len(refused) == len(BAD_CALLS)
    for (named, call, _), (_, message) in zip(BAD_CALLS, refused, strict=True):
        assert message.startswith(f"ctx.{call}(): "), message
        assert named in message, message
    assert RAN == ["body"]  # only the good step's body ran
    assert [s.name for s in steps] == ["fine"]  # nothing of the refused calls was recorded


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


async def _durable(ctx: Any) -> str:
    result: str = await ctx.step("one", _body)
    return result


async def test_a_durable_task_without_a_store_is_refused_before_it_is_accepted() -> None:
    from chongming import Pipeline, run_task, task

    fix = "give it one (Controller(store='tasks.db')"
    async with Controller() as controller:
        with pytest.raises(ConfigurationError, match=r"'durable' is durable .* this controller"):
            controller.register("durable", _durable, durable=True)
        assert "durable" not in controller.registry
        decorated = task(durable=True)(_durable)
        with pytest.raises(ConfigurationError, match=re.escape(fix)):
            controller.register("decorated", decorated)
        # A registry shared with a controller that has a store: refused at submit instead.
        controller.registry.register("shared", _durable, durable=True)
        with pytest.raises(ConfigurationError, match=re.escape(fix)):
            await controller.submit("shared")
        pipeline = Pipeline("p")
        pipeline.node("shared")
        with pytest.raises(ConfigurationError, match=re.escape(fix)):
            await controller.submit_pipeline(pipeline)
        assert await controller.list_tasks() == []  # nothing was accepted
    with pytest.raises(ConfigurationError, match="and run_task has no store"):
        await run_task(decorated)
    assert RAN == []
