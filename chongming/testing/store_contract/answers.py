"""One answer from every store: the same value back, or the same typed error."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from chongming.errors import PayloadError
from chongming.state.records import Progress
from chongming.testing.store_contract._support import (
    _S,
    T0,
    ContractBase,
    _command,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["AnswerContract"]

_NAIVE = datetime(2026, 10, 2, 8, 0, 0)
_INT_MAX = (1 << 63) - 1
_INT_MIN = -(1 << 63)


class AnswerContract(ContractBase):
    async def test_payloads_come_back_in_their_json_form(self) -> None:
        """Tuples come back as lists and non-string keys as strings, from every store."""
        async with self._store() as store:
            snapshot = make_snapshot(
                "t",
                args=((1, 2), {3: "three"}),
                kwargs={"k": (5, (6,))},
                result={1: (2, 3), "nested": [{4: None}]},
            )
            await store.create(snapshot)
            stored = await store.get("t")
            assert stored is not None
            assert stored.args == ([1, 2], {"3": "three"})
            assert type(stored.args[0]) is list
            assert stored.kwargs == {"k": [5, [6]]}
            assert stored.result == {"1": [2, 3], "nested": [{"4": None}]}
            queued, transition = next_step(snapshot, _S.QUEUED, result=(7, {8: (9,)}))
            await store.save(queued, expect_version=0, transitions=[transition])
            stored = await store.get("t")
            assert stored is not None
            assert stored.result == [7, {"8": [9]}]
            assert type(stored.result) is list
            assert stored.args == ([1, 2], {"3": "three"})

    async def test_naive_datetimes_are_refused_alike_and_nothing_written(self) -> None:
        """A naive datetime names no instant: PayloadError everywhere, never a raw TypeError."""
        async with self._store() as store:
            for field in ("created_at", "updated_at", "queued_at", "last_heartbeat_at"):
                error = await _raises(
                    PayloadError, store.create(make_snapshot("t", **{field: _NAIVE}))
                )
                assert error.what == field
                assert await store.get("t") is None
            good = make_snapshot("t")
            await store.create(good)
            queued, transition = next_step(good, _S.QUEUED)
            naive_save = dataclasses.replace(queued, queued_at=_NAIVE)
            await _raises(PayloadError, store.save(naive_save, 0, [transition]))
            naive_move = dataclasses.replace(transition, at=_NAIVE)
            await _raises(PayloadError, store.save(queued, 0, [naive_move]))
            await _raises(PayloadError, store.append([naive_move]))
            await _raises(PayloadError, store.touch("t", heartbeat=_NAIVE))
            await _raises(
                PayloadError, store.touch("t", progress=Progress(done=1), heartbeat=_NAIVE)
            )
            await _raises(PayloadError, store.submit_command(_command("c", created_at=_NAIVE)))
            assert await store.get("t") == good
            assert await store.history("t") == []
            assert await store.claim_commands("node-a", lease_seconds=30) == []
            await store.touch("t", heartbeat=T0 + timedelta(seconds=5))  # aware: fine
            await store.save(queued, 0, [transition])
            assert await store.history("t") == [transition]

    async def test_integers_beyond_64_bits_are_refused_alike(self) -> None:
        async with self._store() as store:
            too_big: list[dict[str, Any]] = [
                {"result": 10**5000},
                {"result": _INT_MAX + 1},
                {"result": [_INT_MIN - 1]},
                {"args": (1 << 64,)},
                {"kwargs": {"n": {"deep": [10**30]}}},
            ]
            for fields in too_big:
                error = await _raises(PayloadError, store.create(make_snapshot("t", **fields)))
                assert "64" in str(error), error
                assert await store.get("t") is None
            edges = make_snapshot("t", args=(_INT_MAX, _INT_MIN), result={"max": _INT_MAX})
            await store.create(edges)
            assert await store.get("t") == edges
            queued, transition = next_step(edges, _S.QUEUED, result=10**5000)
            await _raises(PayloadError, store.save(queued, 0, [transition]))
            assert await store.get("t") == edges
