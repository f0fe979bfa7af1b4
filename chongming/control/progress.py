"""Progress and heartbeats of held tasks, through ``touch``: latest wins, one write per interval.

Neither bumps a version nor ever conflicts with a state write, so they stay
off the write-through path. A task that reports progress a thousand times a
second costs the store one write per interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from chongming.clock import to_datetime
from chongming.errors import StoreClosed, StoreError
from chongming.stores.base import TaskStore

__all__ = ["ProgressWriter"]

_log = logging.getLogger("chongming.control")
_CHUNK = 200


class ProgressWriter:
    """Every ``interval`` seconds, touches the held tasks whose progress or heartbeat moved."""

    def __init__(
        self, store: TaskStore, live_runs: Callable[[], Iterable[Any]], *, interval: float
    ) -> None:
        self._store = store
        self._live_runs = live_runs
        self._interval = interval
        self._written: dict[str, tuple[Any, float | None]] = {}
        self._task: asyncio.Task[None] | None = None
        self.touches = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._touch_forever(), name="chongming:progress"
            )

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def touch_once(self) -> int:
        """Write what moved since the last round; how many tasks were touched."""
        due = []
        seen: dict[str, tuple[Any, float | None]] = {}
        for run in self._live_runs():
            if run.done:
                continue
            state = (run.progress, run.heartbeat_at())
            seen[run.task_id] = state
            if self._written.get(run.task_id) != state:
                due.append((run.task_id, state))
        self._written = {task_id: seen[task_id] for task_id in seen}
        for start in range(0, len(due), _CHUNK):
            chunk = due[start : start + _CHUNK]
            await asyncio.gather(
                *(
                    self._store.touch(
                        task_id,
                        progress=progress,
                        heartbeat=None if beat is None else to_datetime(beat),
                    )
                    for task_id, (progress, beat) in chunk
                )
            )
        self.touches += len(due)
        return len(due)

    async def _touch_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.touch_once()
            except StoreClosed:
                return
            except StoreError as error:
                _log.debug("progress not written this round: %s", error)
