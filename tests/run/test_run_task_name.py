"""``run_task(fn, ..., name="抽取")``: the seed's one-liner; the name is the task's, not fn's."""

from __future__ import annotations

from typing import Any

import pytest

from chongming import run_task
from chongming.errors import ConfigurationError

SEEN: list[tuple[str, dict[str, Any]]] = []


async def extract(ctx: Any, source: str, **kwargs: Any) -> list[int]:
    SEEN.append((ctx.name, kwargs))
    return [0, 1, 2]


async def test_the_seeds_one_liner_names_the_task() -> None:
    SEEN.clear()
    outcome = await run_task(extract, "s3://demo/rows", task_id="demo-1", name="抽取")
    assert outcome.ok
    assert outcome.value == [0, 1, 2]
    assert SEEN == [("抽取", {})]  # the task's name; nothing extra reached the function


@pytest.mark.parametrize("bad", ["", "a\x00b", " padded", "x" * 201, 7])
async def test_a_bad_name_is_refused_before_anything_runs(bad: Any) -> None:
    SEEN.clear()
    with pytest.raises(ConfigurationError, match="task name"):
        await run_task(extract, "s3://demo/rows", name=bad)
    assert SEEN == []
