"""Trace carriers: stored with an enqueued task in the same write, read back after a claim."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

from chongming.errors import DuplicateTaskId, PayloadError
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.queue import MAX_TRACE_CARRIER
from chongming.testing.store_contract._support import (
    T0,
    ContractBase,
    _raises,
    make_snapshot,
    next_step,
)

__all__ = ["TraceCarrierContract"]

_SERVES = {"extract": [None]}
#: What OpenTelemetry's W3C propagator writes.
CARRIER = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
}


def _queued(task_id: str, **fields: object) -> tuple[TaskSnapshot, Transition]:
    pending = make_snapshot(task_id, **fields)
    queued, transition = next_step(pending, TaskStatus.QUEUED, trigger="orchestrator:enqueued")
    return dataclasses.replace(queued, queued_at=queued.updated_at), transition


class TraceCarrierContract(ContractBase):
    """Optional: a store that keeps trace carriers (``trace_carrier=``, ``trace_carriers``).

    Mix it in beside :class:`StoreContract`; a store that keeps none (the
    port's default) leaves it out, and its attempts start traces of their own.
    """

    async def test_a_carrier_is_stored_with_its_task_and_read_back_by_id(self) -> None:
        async with self._store() as store:
            traced, step = _queued("c-1")
            assert (await store.enqueue(traced, [step], trace_carrier=CARRIER)).created
            plain, step = _queued("c-2")
            await store.enqueue(plain, [step])
            empty, step = _queued("c-3")
            await store.enqueue(empty, [step], trace_carrier={})  # an empty one is none
            found = await store.trace_carriers(["c-1", "c-2", "c-3", "unknown"])
            assert found == {"c-1": CARRIER}
            assert await store.trace_carriers([]) == {}
            assert await store.get("c-1") == traced  # the task itself is as without one

    async def test_concurrent_enqueues_keep_each_carrier_with_its_own_task(self) -> None:
        async with self._store() as store:
            carriers = {f"c-{n}": {"traceparent": f"00-{n:032x}-{n + 1:016x}-01"} for n in range(8)}

            async def one(n: int) -> None:
                snapshot, step = _queued(f"c-{n}")
                carrier = carriers.get(f"c-{n}") if n % 2 else None
                await store.enqueue(snapshot, [step], trace_carrier=carrier)

            await asyncio.gather(*(one(n) for n in range(8)))  # one batch where stores batch
            found = await store.trace_carriers([f"c-{n}" for n in range(8)])
            assert found == {f"c-{n}": carriers[f"c-{n}"] for n in range(1, 8, 2)}

    async def test_a_carrier_outlives_the_claim_and_the_start(self) -> None:
        async with self._store() as store:
            for task_id in ("c-1", "c-2"):
                snapshot, step = _queued(task_id)
                await store.enqueue(snapshot, [step], trace_carrier=CARRIER)
            [plain] = await store.claim("node", serves=_SERVES, limit=1)
            at = T0 + timedelta(minutes=1)
            [started] = await store.claim_started("node", serves=_SERVES, limit=1, at=at)
            found = await store.trace_carriers([plain.task_id, started.snapshot.task_id])
            assert found == {"c-1": CARRIER, "c-2": CARRIER}

    async def test_an_enqueue_that_writes_no_task_writes_no_carrier(self) -> None:
        async with self._store() as store:
            first, step = _queued("c-1", idempotency_key="k")
            await store.enqueue(first, [step], trace_carrier=CARRIER)
            twin, step = _queued("c-2", idempotency_key="k")
            other = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
            assert not (await store.enqueue(twin, [step], trace_carrier=other)).created
            taken, step = _queued("c-1")
            await _raises(DuplicateTaskId, store.enqueue(taken, [step], trace_carrier=other))
            assert await store.trace_carriers(["c-1", "c-2"]) == {"c-1": CARRIER}

    async def test_a_bad_carrier_is_refused_and_nothing_is_written(self) -> None:
        half = MAX_TRACE_CARRIER // 2
        at_the_cap = {"a" * half: "b" * (MAX_TRACE_CARRIER - half)}
        bad: list[object] = [
            "traceparent=00-abc",
            [("traceparent", "x")],
            {"traceparent": 1},
            {1: "x"},
            {"": "x"},
            {"traceparent": "a\x00b"},
            {"traceparent": "\ud800"},
            {"a" * half: "b" * (MAX_TRACE_CARRIER - half + 1)},
            {"k": "é" * (MAX_TRACE_CARRIER // 2)},  # 1024 characters, 1025 bytes with the key
        ]
        async with self._store() as store:
            for n, carrier in enumerate(bad):
                snapshot, step = _queued(f"bad-{n}")
                await _raises(
                    PayloadError,
                    store.enqueue(snapshot, [step], trace_carrier=carrier),  # type: ignore[arg-type]
                )
                assert await store.get(f"bad-{n}") is None
            snapshot, step = _queued("cap")
            assert (await store.enqueue(snapshot, [step], trace_carrier=at_the_cap)).created
            assert await store.trace_carriers(["cap"]) == {"cap": at_the_cap}
