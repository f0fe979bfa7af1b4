"""A SQLite store populated by a real controller: tasks that succeeded, failed and stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller
from tests.conftest import FAST

#: A label with an ANSI escape, a bidi override and a newline, next to a wide one.
NASTY_LABEL = "evil\x1b[31m\u202e\nlabel"


async def _ok(ctx: Any, value: int) -> int:
    return value * 2


async def _boom(ctx: Any) -> None:
    raise ValueError("boom")


async def _loops(ctx: Any) -> None:
    while True:
        await ctx.checkpoint()
        await asyncio.sleep(0.005)


async def _populate(path: Path) -> None:
    async with Controller(store=str(path), owner="writer", windows=FAST) as controller:
        controller.register("ok", _ok)
        controller.register("boom", _boom)
        controller.register("loops", _loops)
        ok = await controller.submit(
            "ok", 21, task_id="ok-1", label="同步-A", bucket_key="tenant-A"
        )
        bad = await controller.submit("boom", task_id="bad-1", label=NASTY_LABEL)
        loop = await controller.submit("loops", task_id="stop-1", tags={"slow"})
        await ok.wait()
        await bad.wait()
        while (await controller.get("stop-1")).status.value != "running":
            await asyncio.sleep(0.01)
        assert await controller.stop("stop-1", reason="window")
        await loop.wait()


@pytest.fixture(scope="session")
def _populated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-store") / "tasks.db"
    asyncio.run(_populate(path))
    return path


@pytest.fixture
def db(_populated_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the populated store for each test (some tests write to it)."""
    import shutil

    copy = tmp_path / "tasks.db"
    shutil.copyfile(_populated_template, copy)
    for suffix in ("-wal", "-shm"):
        extra = Path(str(_populated_template) + suffix)
        if extra.exists():
            shutil.copyfile(extra, Path(str(copy) + suffix))
    return copy
