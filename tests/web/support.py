"""Helpers of the dashboard tests: a task module, the CSRF token of a page, PNG checks."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from chongming import Controller, TaskContext


async def endless(ctx: TaskContext, interval: float = 0.02) -> None:
    """Runs until stopped; reports progress so the page has a bar."""
    beats = 0
    while True:
        await ctx.checkpoint()
        beats += 1
        ctx.progress(beats % 100, total=100, unit="beats", message="looping")
        await asyncio.sleep(interval)


async def quick(ctx: TaskContext, n: int = 1) -> dict[str, Any]:
    await ctx.checkpoint()
    return {"n": n}


async def broken(ctx: TaskContext) -> None:
    await ctx.checkpoint()
    raise RuntimeError("the upstream <b>API</b> returned 503")


def _rows(size: int) -> list[str]:
    return ["<td>row</td>" * 4] * size  # an enormous result: the page shows a bounded preview


async def _flaky() -> None:
    raise RuntimeError("the <i>flaky</i> upstream said no")


async def _charge(info: Any) -> dict[str, Any]:
    return {"charged": 5, "key": info.idempotency_key}


async def journaled(ctx: TaskContext, size: int = 5_000, park: float = 0.0) -> dict[str, Any]:
    """A durable task with a journal of every kind: steps, an error, an effect, waits."""
    rows = await ctx.step("fetch <b>rows</b>", _rows, size)
    await ctx.effect("charge", _charge)
    try:
        await ctx.step("flaky", _flaky)
    except Exception:
        pass
    approval = await ctx.wait_for_fact("approval", timeout=60)
    await ctx.sleep("cool-down", park)
    return {"rows": len(rows), "approval": approval}


def register(controller: Controller) -> None:
    controller.register("journaled", journaled, durable=True)
    controller.register("endless", endless)
    controller.register("quick", quick)
    controller.register("broken", broken)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, "the page has no CSRF field"
    return found.group(1)


#: Run in the page: decode a PNG (base64) in a canvas, return the share of sampled
#: pixels that differ from the most common one (0.0: a blank picture).
PIXEL_SPREAD_JS = """
const done = arguments[arguments.length - 1];
const image = new Image();
image.onload = () => {
  const canvas = document.createElement("canvas");
  canvas.width = image.width; canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const data = context.getImageData(0, 0, image.width, image.height).data;
  const counts = new Map();
  let total = 0;
  for (let i = 0; i < data.length; i += 4 * 7) {
    const key = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
    counts.set(key, (counts.get(key) || 0) + 1);
    total += 1;
  }
  let most = 0;
  for (const n of counts.values()) { most = Math.max(most, n); }
  done([image.width, image.height, 1 - most / total, counts.size]);
};
image.onerror = () => done(null);
image.src = "data:image/png;base64," + arguments[0];
"""


@contextlib.asynccontextmanager
async def dashboard_client(controller: Controller) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client talking to the dashboard of ``controller`` in process; closed after."""
    from chongming.web import create_app

    app = create_app(controller)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client
    finally:
        await app.aclose()
