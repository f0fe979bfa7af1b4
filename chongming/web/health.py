"""A worker's health: liveness (the loop answers) and readiness (lease held, store reachable).

Served by ``chongming worker --health-port`` on a
:class:`~chongming.web.probe_server.ProbeServer`:

- ``GET /livez`` — 200 whenever it is answered. It is answered on the
  worker's event loop, so a loop that is stuck (a task blocking it, a
  deadlock) answers nothing and the probe's own timeout fails it: that, and
  only that, is what a restart cures.
- ``GET /readyz`` — 200 when the worker has started, is not stopping, the
  store answered a read within ``store_timeout`` seconds, and that read
  shows this process's node lease live (the row under its owner name names
  this host and pid); otherwise 503. The body is a JSON object saying which
  check failed. One store read per probe (the node rows, one small query);
  nothing is cached, so the answer is never older than the probe.

A store that is away makes the worker unready, not dead: its tasks keep
running and their transitions are buffered (docs/reliability.md, P1), so a restart
would only lose work.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
from typing import TYPE_CHECKING

from chongming.logs.redaction import redact_text
from chongming.web.probe_server import Response, Route

if TYPE_CHECKING:
    from chongming.controller.controller import Controller

__all__ = ["Readiness", "WorkerHealth"]

JSON = "application/json"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Readiness:
    """One readiness check: ``ready`` and, when not, ``reasons`` (one line each)."""

    ready: bool
    lease: str  # "held", "not held", "unknown"
    store: str  # "reachable", "unreachable", "unknown"
    reasons: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "ready": self.ready,
            "lease": self.lease,
            "store": self.store,
            "reasons": list(self.reasons),
        }


class WorkerHealth:
    """The checks behind ``/livez`` and ``/readyz`` for one worker's controller."""

    def __init__(self, controller: Controller, *, store_timeout: float = 2.0) -> None:
        self._controller = controller
        self.store_timeout = store_timeout
        #: Set by the worker once its controller has started (registered its node).
        self.started = False
        #: Set by the worker when it begins to stop: it claims nothing more.
        self.stopping = False

    def routes(self) -> dict[str, Route]:
        return {"/livez": self.liveness, "/readyz": self.readiness}

    async def liveness(self) -> Response:
        body = {"live": True, "owner": self._controller.owner}
        return Response(status=200, body=_json(body), content_type=JSON)

    async def readiness(self) -> Response:
        found = await self.check()
        return Response(
            status=200 if found.ready else 503, body=_json(found.as_json()), content_type=JSON
        )

    async def check(self) -> Readiness:
        if not self.started:
            return Readiness(ready=False, lease="unknown", store="unknown", reasons=("starting",))
        if self.stopping:
            reasons = ("stopping: claims nothing more",)
            return Readiness(ready=False, lease="unknown", store="unknown", reasons=reasons)
        controller = self._controller
        store = controller.store
        if store is None:
            return Readiness(ready=False, lease="unknown", store="unknown", reasons=("no store",))
        try:
            async with asyncio.timeout(self.store_timeout):
                nodes = await store.nodes()
        except TimeoutError:
            reason = f"store: no answer within {self.store_timeout:g}s"
            return Readiness(ready=False, lease="unknown", store="unreachable", reasons=(reason,))
        except Exception as error:  # any store failure: unready, never a failed probe handler
            reason = redact_text(f"store: {type(error).__name__}: {error}")
            return Readiness(ready=False, lease="unknown", store="unreachable", reasons=(reason,))
        pid, host = os.getpid(), socket.gethostname()
        ours = [
            node
            for node in nodes
            if node.info.owner == controller.owner
            and node.info.pid == pid
            and node.info.host == host
        ]
        if ours and ours[0].live:
            return Readiness(ready=True, lease="held", store="reachable")
        reason = (
            f"lease: node {controller.owner!r} expired"
            if ours
            else f"lease: no node row {controller.owner!r} for this process"
        )
        return Readiness(ready=False, lease="not held", store="reachable", reasons=(reason,))


def _json(data: object) -> bytes:
    return (json.dumps(data, ensure_ascii=False) + "\n").encode()
