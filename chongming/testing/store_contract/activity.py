"""Activity: recent ends newest first and bounded, the oldest claimable task, bad arguments.

Optional for a third-party store: mix :class:`ActivityContract` into a
contract subclass only if the backend implements ``recent_ends``.
"""

from __future__ import annotations

from datetime import timedelta

from chongming.errors import PayloadError
from chongming.state.records import TaskSnapshot
from chongming.state.status import TaskStatus
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


class ActivityContract(ContractBase):
    async def test_recent_ends_are_newest_first_since_the_cut_and_bounded(self) -> None:
        async with self._store() as store:
            for task_id, status, seconds in (
                ("old", _S.SUCCEEDED, -3600),
                ("a", _S.SUCCEEDED, 1),
                ("b", _S.FAILED, 2),
                ("c", _S.STOPPED, 3),
            ):
                await store.create(_ended(task_id, status, seconds))
            await store.create(make_snapshot("busy", status=_S.RUNNING, owner="node-a"))
            ends = await store.recent_ends(T0, limit=10)
            assert [end.status for end in ends] == [_S.STOPPED, _S.FAILED, _S.SUCCEEDED]
            assert ends[0].finished_at == T0 + timedelta(seconds=3)
            assert ends[0].started_at == T0 + timedelta(seconds=1)
            assert [end.status for end in await store.recent_ends(T0, limit=2)] == [
                _S.STOPPED,
                _S.FAILED,
            ]
            assert len(await store.recent_ends(T0 - timedelta(hours=2), limit=100)) == 4
            assert await store.recent_ends(T0 + timedelta(hours=1), limit=10) == []

    async def test_the_oldest_queued_is_the_longest_waiting_claimable_task(self) -> None:
        async with self._store() as store:
            assert await store.oldest_queued() is None
            for task_id, seconds, owner in (
                ("late", 5, None),
                ("early", 2, None),
                ("held", 0, "n"),
            ):
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

    async def test_recent_ends_refuses_bad_arguments(self) -> None:
        async with self._store() as store:
            await _raises(PayloadError, store.recent_ends(T0.replace(tzinfo=None), limit=10))
            for limit in (0, -1, True, 10**9):
                await _raises(PayloadError, store.recent_ends(T0, limit=limit))
