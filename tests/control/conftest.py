"""Fixtures of the control-plane tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chongming.stores.base import TaskStore
from tests.control.support import open_shared


@pytest.fixture(params=["sqlite", "postgres"])
async def shared(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[list[str], TaskStore]]:
    """Arguments naming a shared store for a node process, and a store of our own on it."""
    async for pair in open_shared(request.param, tmp_path):
        yield pair
