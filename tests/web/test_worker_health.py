"""Readiness: started, not stopping, the store answers and shows this process's lease live."""

from __future__ import annotations

import json

from chongming import Controller
from chongming.errors import StoreUnavailable
from chongming.stores.memory import InMemoryTaskStore
from chongming.stores.nodes import NodeRecord
from chongming.web.health import WorkerHealth


class FlakyStore(InMemoryTaskStore):
    """An in-memory store whose node reads fail while ``down`` (the lease keeps renewing)."""

    down = False

    async def nodes(self) -> list[NodeRecord]:
        if self.down:
            raise StoreUnavailable("the store went away (password=Cn4ry)")
        return await super().nodes()


async def test_readiness_follows_start_store_lease_and_stop() -> None:
    store = FlakyStore()
    controller = Controller(store=store, owner="w-1", work=True, poll_interval=0.05)
    health = WorkerHealth(controller, store_timeout=1.0)
    live = await health.liveness()
    assert (live.status, json.loads(live.body)) == (200, {"live": True, "owner": "w-1"})
    assert (await health.check()).reasons == ("starting",)
    async with controller:
        health.started = True
        ready = await health.readiness()
        assert ready.status == 200
        assert json.loads(ready.body) == {
            "ready": True,
            "lease": "held",
            "store": "reachable",
            "reasons": [],
        }
        store.down = True
        unready = await health.readiness()
        assert unready.status == 503
        body = json.loads(unready.body)
        assert (body["ready"], body["store"]) == (False, "unreachable")
        assert body["reasons"] == ["store: StoreUnavailable: the store went away (password=***)"]
        store.down = False
        assert (await health.readiness()).status == 200
        health.stopping = True
        assert (await health.check()).reasons == ("stopping: claims nothing more",)
    health.stopping = False  # closed: the lease is released, so no longer held
    closed = await health.check()
    assert (closed.ready, closed.lease) == (False, "not held")


async def test_a_store_that_does_not_answer_in_time_makes_the_worker_unready() -> None:
    import asyncio

    class Hanging(InMemoryTaskStore):
        hang = False

        async def nodes(self) -> list[NodeRecord]:
            if self.hang:
                await asyncio.Event().wait()
            return await super().nodes()

    store = Hanging()
    async with Controller(store=store, owner="w-2", work=True, poll_interval=0.05) as controller:
        health = WorkerHealth(controller, store_timeout=0.05)
        health.started = True
        assert (await health.check()).ready
        store.hang = True
        found = await health.check()
        assert (found.ready, found.store, found.reasons) == (
            False,
            "unreachable",
            ("store: no answer within 0.05s",),
        )
