"""The launch gate of a durable task's attempt: ``starting`` made durable, then its journal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from chongming.plane.children import TaskPlane
from chongming.plane.durable import Journal, RunSync
from chongming.plane.outages import through_outages
from chongming.plane.parking import PARK_AFTER
from chongming.stores.base import TaskStore
from chongming.stores.durable import StaleEpoch
from chongming.task_api.journal import StepObserver

__all__ = ["JournalGate"]


class JournalGate:
    """An attempt's launch gate for a durable task: durable ``starting``, then its journal.

    Called once by the attempt before the function begins. False (do not
    start) when the store does not hold this node's ``starting`` or another
    owner holds the task. An unreachable store is waited for; any other
    store failure raises, and the attempt fails.
    """

    __slots__ = (
        "_durable",
        "_max_resumes",
        "_observe",
        "_owner",
        "_park_threshold",
        "_parkable",
        "_plane",
        "_run_sync",
        "_store",
        "_task_id",
        "journal",
    )

    def __init__(
        self,
        store: TaskStore,
        task_id: str,
        owner: str,
        *,
        max_resumes: int,
        durable: Callable[[], Awaitable[bool]] | None,
        parkable: bool = False,
        park_threshold: float = PARK_AFTER,
        run_sync: RunSync | None = None,
        observe: StepObserver | None = None,
        plane: TaskPlane | None = None,
    ) -> None:
        self._observe = observe
        self._plane = plane
        self._parkable = parkable
        self._park_threshold = park_threshold
        self._run_sync = run_sync
        self._store = store
        self._task_id = task_id
        self._owner = owner
        self._max_resumes = max_resumes
        self._durable = durable
        self.journal: Journal | None = None

    async def __call__(self) -> bool:
        if self._durable is not None and not await self._durable():
            return False
        store, task_id = self._store, self._task_id
        try:
            epoch = await through_outages(
                lambda: store.begin_durable_attempt(
                    task_id, self._owner, max_resumes=self._max_resumes
                )
            )
        except StaleEpoch:
            return False
        recorded = await through_outages(lambda: store.steps(task_id))
        self.journal = Journal(store, task_id, epoch, recorded, run_sync=self._run_sync)
        self.journal.parkable = self._parkable
        self.journal.park_threshold = self._park_threshold
        self.journal.observe = self._observe
        self.journal.plane = self._plane
        return True
