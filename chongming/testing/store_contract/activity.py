"""Activity: ends by minute and status, recent durations, the oldest claimable task, bad input.

Optional for a third-party store: mix :class:`ActivityContract` into a
contract subclass only if the backend implements ``end_counts``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from chongming.errors import PayloadError
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.base import TaskStore
from chongming.testing.store_contract._support import T0, ContractBase, _raises, make_snapshot

__all__ = ["ActivityContract"]

_S = TaskStatus


def _ended(task_id: str, status: TaskStatus, seconds: float) -> TaskSnapshot:
    at = T0 + timedelta(seconds=seconds)
    return make_snapshot(
        task_id,
        status=status,
        status_version=1,
        attempt=1,
        started_at=at - timedelta(seconds=2),
        finished_at=at,
        updated_at=at,
        owner="node-a",
    )


def _ran(task_id: str, at: datetime, version: int = 2) -> Transition:
    """The ``starting -> running`` that begins a run at ``at``."""
    return Transition(
        task_id=task_id,
        version=version,
        from_status=_S.STARTING,
        to_status=_S.RUNNING,
        at=at,
        trigger="executor:launched",
        attempt=1,
    )


class ActivityContract(ContractBase):
    async def _ends(self, store: TaskStore) -> None:
        for task_id, status, seconds in (
            ("old", _S.SUCCEEDED, -3600),
            ("a", _S.SUCCEEDED, 1),
            ("a2", _S.SUCCEEDED, 30),
            ("b", _S.FAILED, 61),
            ("c", _S.STOPPED, 125),
            ("late", _S.SUCCEEDED, 180),  # past a 3-minute window
        ):
            ended = _ended(task_id, status, seconds)
            assert ended.finished_at is not None
            await store.create(ended, [_ran(task_id, ended.finished_at - timedelta(seconds=2))])
        await store.create(make_snapshot("busy", status=_S.RUNNING, owner="node-a"))

    async def test_end_counts_count_each_minute_and_status_of_the_window(self) -> None:
        async with self._store() as store:
            await self._ends(store)
            counts = await store.end_counts(T0, minutes=3)
            found = sorted((c.minute, c.status.value, c.count) for c in counts)
            assert found == [(0, "succeeded", 2), (1, "failed", 1), (2, "stopped", 1)]
            assert await store.end_counts(T0 + timedelta(hours=2), minutes=60) == []

    async def test_recent_durations_are_newest_first_and_bounded(self) -> None:
        async with self._store() as store:
            await self._ends(store)
            assert await store.recent_durations(T0, limit=100) == [2.0] * 5
            assert len(await store.recent_durations(T0, limit=2)) == 2
            assert len(await store.recent_durations(T0 - timedelta(hours=2), limit=100)) == 6
            varied = make_snapshot(
                "slow",
                status=_S.FAILED,
                status_version=1,
                attempt=1,
                started_at=T0 + timedelta(seconds=200),
                finished_at=T0 + timedelta(seconds=212.5),
                owner="node-a",
            )
            # Two runs (a retry): the duration is the last one's, 205 s to 212.5 s.
            runs = [
                _ran("slow", T0 + timedelta(seconds=200), 2),
                _ran("slow", T0 + timedelta(seconds=205), 3),
            ]
            await store.create(varied, runs)
            assert (await store.recent_durations(T0, limit=1)) == [7.5]
            # An end with no run in its history (never ran) has no duration.
            await store.create(_ended("unrun", _S.SUCCEEDED, 300), [])
            assert (await store.recent_durations(T0 + timedelta(seconds=250), limit=10)) == []

    async def test_the_oldest_queued_is_the_longest_waiting_claimable_task(self) -> None:
        async with self._store() as store:
            assert await store.oldest_queued() is None
            waiting = (("late", 5, None), ("early", 2, None), ("held", 0, "n"))
            for task_id, seconds, owner in waiting:
                await store.create(
                    make_snapshot(
                        task_id,
                        status=_S.QUEUED,
                        status_version=1,
                        queued_at=T0 + timedelta(seconds=seconds),
                        owner=owner,
                    )
                )
            assert await store.oldest_queued() == T0 + timedelta(seconds=2)

    async def test_activity_refuses_bad_arguments(self) -> None:
        async with self._store() as store:
            naive = T0.replace(tzinfo=None)
            await _raises(PayloadError, store.end_counts(naive, minutes=10))
            await _raises(PayloadError, store.recent_durations(naive, limit=10))
            for bad in (0, -1, True, 10**9):
                await _raises(PayloadError, store.end_counts(T0, minutes=bad))
                await _raises(PayloadError, store.recent_durations(T0, limit=bad))
