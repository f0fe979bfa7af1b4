"""Progress and heartbeats of held tasks, through ``touch``: latest wins, one write per interval.

Neither bumps a version nor ever conflicts with a state write, so they stay
off the write-through path. A task that reports progress a thousand times a
second costs the store one write per interval. A heartbeat alone (the task
checkpoints but reports no progress) is written ten times less often:
liveness is judged by node leases, never by heartbeats, so a heartbeat in
the store is for people reading it, and ten thousand checkpointing tasks
must not keep the store busy (the lease renewal waits behind those writes).
Each touch names the run's owner: once another node took the task over, the
store ignores this node's touches (a zombie's heartbeat never lands).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from chongming.background import BackgroundTask
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
        self._heartbeat_every = interval * 10
        self._loop = BackgroundTask("chongming:progress")
        self.touches = 0

    def start(self) -> None:
        self._loop.start(self._touch_forever)

    async def aclose(self) -> None:
        await self._loop.stop()

    async def touch_once(self) -> int:
        """Write what moved since the last round; how many tasks were touched."""
        due = []
        seen: dict[str, tuple[Any, float | None]] = {}
        for run in self._live_runs():
            if run.done:
                continue
            state = (run.progress, run.heartbeat_at())
            written = self._written.get(run.task_id)
            if (
                written is None
                or written[0] is not state[0]
                or _beat_due(written[1], state[1], self._heartbeat_every)
            ):
                due.append((run.task_id, run.owner, state))
                seen[run.task_id] = state
            else:
                seen[run.task_id] = written
        self._written = {task_id: seen[task_id] for task_id in seen}
        for start in range(0, len(due), _CHUNK):
            chunk = due[start : start + _CHUNK]
            await asyncio.gather(
                *(
                    self._store.touch(
                        task_id,
                        progress=progress,
                        heartbeat=None if beat is None else to_datetime(beat),
                        owner=owner,
                    )
                    for task_id, owner, (progress, beat) in chunk
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


def _beat_due(written: float | None, now: float | None, every: float) -> bool:
    if now is None:
        return False
    return written is None or now - written >= every
