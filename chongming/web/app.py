"""The dashboard as an ASGI app (Starlette): pages, live fragments, controls, ``/metrics``.

:func:`create_app` takes your :class:`~chongming.Controller` (the app never
closes it) or a store location (the app opens a query-only controller on it
— it never registers as a node and never claims commands — and closes it on
shutdown or :meth:`Dashboard.aclose`). Serve it with uvicorn, or mount it in
a FastAPI / Starlette service: links follow the mount path. Who may reach a
route (token, read-only, origin, CSRF) is :mod:`chongming.web.guards`; this
module holds what each route shows.

Routes (``GET`` unless marked):

==============================  ==============================================
``/``                           tasks, filtered and paginated
``/tasks/{id}``                 one task: facts, diagram, timeline, controls
``/nodes``                      nodes, buckets (owned twice / orphaned), limits
``/charts``                     throughput, queue depth and age, attempt durations (SVG)
``/reconcile``                  a dry run; ``POST`` applies it
``POST /control``               stop / pause / resume (form: task_id, kind, reason)
``/fragments/...``              the live parts of the pages, polled by the script
``/api/tasks``, ``/api/tasks/{id}``  the same data as JSON (the CLI's shapes)
``/metrics``                    Prometheus text format
``/login`` (and ``POST``)       only when a token is configured
``/static/dashboard.{css,js}``  the only assets; nothing comes from the network
==============================  ==============================================
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from chongming.plane.waiting import WaitingReason
from chongming.state.records import TaskSnapshot
from chongming.state.serialize import snapshot_to_json, transition_to_json
from chongming.stores.base import TaskStore
from chongming.web import board, charts_page, pages, pages_ops, pipelines_page
from chongming.web.activity import read_activity
from chongming.web.assets import CSS, JS
from chongming.web.extras import need
from chongming.web.guards import RequestGuard
from chongming.web.metrics import CONTENT_TYPE, ChongmingMetrics
from chongming.web.responses import asset, header, html, secure
from chongming.web.security import Guard, host_allowed

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import Receive, Scope, Send

    from chongming.controller.controller import Controller

__all__ = ["Dashboard", "create_app"]

#: How long the per-status counts of the list are reused (seconds).
COUNTS_TTL = 2.0


class Dashboard:
    """The ASGI app :func:`create_app` returns; see the module docstring."""

    def __init__(
        self,
        controller: Controller,
        *,
        owns_controller: bool,
        read_only: bool,
        guard: Guard,
        store_label: str,
        metrics: ChongmingMetrics,
        actor: str,
    ) -> None:
        need("starlette", "web")
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.controller = controller
        self.metrics = metrics
        self.read_only = read_only
        self._owns = owns_controller
        self._guard = guard
        self._requests = RequestGuard(guard, read_only=read_only, store_label=store_label)
        self._actor = actor
        self._counted: tuple[float, dict[str, int]] | None = None
        read, write = self._requests.read, self._requests.write
        routes = [
            Route("/", read(self._list)),
            Route("/fragments/tasks", read(self._list_fragment)),
            Route("/tasks/{task_id:path}", read(self._task)),
            Route("/fragments/tasks/{task_id:path}", read(self._task_fragment)),
            Route("/api/tasks", read(self._api_list)),
            Route("/api/tasks/{task_id:path}", read(self._api_task)),
            Route("/pipelines/{run_id:path}", read(self._pipeline)),
            Route("/api/pipelines/{run_id:path}", read(self._api_pipeline)),
            Route("/nodes", read(self._nodes)),
            Route("/charts", read(self._charts)),
            Route("/fragments/charts", read(self._charts_fragment)),
            Route("/reconcile", read(self._reconcile_dry)),
            Route("/reconcile", write(self._reconcile_apply), methods=["POST"]),
            Route("/control", write(self._control), methods=["POST"]),
            Route("/metrics", read(self._metrics)),
            Route("/login", self._requests.login, methods=["GET", "POST"]),
            Route("/static/dashboard.css", self._css),
            Route("/static/dashboard.js", self._js),
        ]
        self.app = Starlette(routes=routes, lifespan=self._lifespan)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not host_allowed(
            header(scope, b"host"), self._guard.allowed_hosts
        ):
            # A foreign Host: a page of another site whose name was made to
            # resolve here (DNS rebinding). Nothing is read, nothing is done.
            from starlette.responses import PlainTextResponse

            refused = PlainTextResponse(
                "this dashboard does not answer to that host name; allow it with "
                "--allowed-host (create_app(allowed_hosts=...))",
                status_code=421,
            )
            await secure(refused)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def aclose(self) -> None:
        """Close the controller if this app opened it (a mounted app gets no lifespan)."""
        if self._owns:
            await self.controller.close()  # closes the store only if it opened it

    def _lifespan(self, app: Any) -> Any:
        import contextlib

        @contextlib.asynccontextmanager
        async def lifespan(_: Any) -> Any:
            yield
            await self.aclose()

        return lifespan(app)

    # -- pages ---------------------------------------------------------------------------

    async def _page(self, request: Request) -> board.TaskPage:
        wanted = board.ListFilter.parse(request.query_params)
        page = await board.list_page(self.controller, wanted, counts=False)
        return dataclasses.replace(page, counts=await self._counts())

    async def _counts(self) -> dict[str, int]:
        """Tasks per status in the store, read at most every COUNTS_TTL seconds.

        The list and its live poll show them on every request; one read scans
        the store's (status, bucket, owner) index, ~14 ms at 100,000 tasks.
        """
        now = time.monotonic()
        cached = self._counted
        if cached is not None and now - cached[0] < COUNTS_TTL:
            return cached[1]
        counts = await board.store_counts(self.controller)
        self._counted = (now, counts)
        return counts

    async def _list(self, request: Request) -> Response:
        page = await self._page(request)
        return html(pages.list_page(self._requests.chrome(request), page))

    async def _list_fragment(self, request: Request) -> Response:
        page = await self._page(request)
        return html(pages.list_body(self._requests.chrome(request), page))

    async def _task(self, request: Request) -> Response:
        view = await board.task_view(self.controller, request.path_params["task_id"])
        sent = request.query_params.get("sent")
        notice = _notice(sent, request.query_params.get("issued"), view)
        return html(pages.task_page(self._requests.chrome(request), view, notice))

    async def _task_fragment(self, request: Request) -> Response:
        view = await board.task_view(self.controller, request.path_params["task_id"])
        return html(pages.task_body(view))

    async def _api_list(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        page = await self._page(request)
        data = {
            "tasks": [_with_waiting(s, page.waiting.get(s.task_id)) for s in page.tasks],
            "has_next": page.has_next,
            "counts": dict(page.counts),
        }
        return secure(JSONResponse(data))

    async def _api_task(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        view = await board.task_view(self.controller, request.path_params["task_id"])
        data = {
            "task": _with_waiting(view.snapshot, view.waiting),
            "transitions": [transition_to_json(t) for t in view.history],
            "parent": view.parent,
            "children": [child.task_id for child in view.children],
        }
        return secure(JSONResponse(data))

    async def _pipeline(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        chrome = self._requests.chrome(request)
        return html(await pipelines_page.pipeline_markup(self.controller.store, chrome, run_id))

    async def _api_pipeline(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        run_id = request.path_params["run_id"]
        data = await pipelines_page.pipeline_data(self.controller.store, run_id)
        return secure(JSONResponse(data))

    async def _charts(self, request: Request) -> Response:
        view = await read_activity(self.controller.store, await self._counts())
        return html(charts_page.charts_page(self._requests.chrome(request), view))

    async def _charts_fragment(self, request: Request) -> Response:
        view = await read_activity(self.controller.store, await self._counts())
        return html(charts_page.charts_body(view))

    async def _nodes(self, request: Request) -> Response:
        view = await board.nodes_view(self.controller)
        return html(pages_ops.nodes_page(self._requests.chrome(request), view))

    async def _reconcile_dry(self, request: Request) -> Response:
        report = await board.reconcile(self.controller, apply=False, reason=None)
        return html(pages_ops.reconcile_page(self._requests.chrome(request), report))

    async def _reconcile_apply(self, request: Request) -> Response:
        form: Mapping[str, str] = request.state.form
        report = await board.reconcile(self.controller, apply=True, reason=form.get("reason"))
        return html(pages_ops.reconcile_page(self._requests.chrome(request), report))

    async def _control(self, request: Request) -> Response:
        from starlette.responses import RedirectResponse

        form: Mapping[str, str] = request.state.form
        result = await board.control(
            self.controller,
            form.get("kind", ""),
            form.get("task_id", ""),
            form.get("reason"),
            actor=self._actor,
        )
        base = self._requests.chrome(request).base
        issued = "1" if result.issued else "0"
        target = f"{base}/tasks/{quote(result.task_id, safe='')}?sent={result.kind}&issued={issued}"
        return secure(RedirectResponse(target, status_code=303))

    async def _metrics(self, request: Request) -> Response:
        from starlette.responses import Response

        store = self.controller.store
        if store is not None:
            await self.metrics.refresh_store(store)
        return secure(Response(self.metrics.exposition(), media_type=CONTENT_TYPE))

    async def _css(self, request: Request) -> Response:
        from starlette.responses import Response

        return asset(Response(CSS, media_type="text/css"))

    async def _js(self, request: Request) -> Response:
        from starlette.responses import Response

        return asset(Response(JS, media_type="text/javascript"))


def _with_waiting(snapshot: TaskSnapshot, waiting: WaitingReason | None) -> dict[str, Any]:
    """A task's JSON and ``waiting``: why a queued task waits (``null``: it does not)."""
    data = snapshot_to_json(snapshot)
    data["waiting"] = None if waiting is None else waiting.to_json()
    return data


def _notice(sent: str | None, issued: str | None, view: board.TaskView) -> str | None:
    if sent not in board.CONTROLS:
        return None
    if issued != "1":
        return f"{view.snapshot.task_id} had already ended; nothing was sent"
    owner = view.snapshot.owner or "any node"
    return f"{sent} requested (addressed to {owner})"


def describe_store(target: object) -> str:
    """What the header shows of the store: never a password."""
    from chongming.plane.location import describe_location

    if isinstance(target, str | os.PathLike):
        return describe_location(target)
    if isinstance(target, TaskStore):
        path = getattr(target, "path", None)
        if type(target).__name__ == "SqliteTaskStore" and isinstance(path, str):
            return f"sqlite {path}"
        location = getattr(target, "location", None)
        if type(target).__name__ == "PostgresTaskStore" and isinstance(location, str):
            return location  # the DSN, its password redacted
        return type(target).__name__  # never a repr: a store of yours may show secrets
    return "no store"


def create_app(
    controller_or_store_location: Controller | TaskStore | str | os.PathLike[str],
    *,
    read_only: bool = False,
    token: str | None = None,
    metrics: ChongmingMetrics | None = None,
    actor: str = "dashboard",
    num_buckets: int = 64,
    owned_buckets: frozenset[int] | None = None,
    owner: str | None = None,
    allowed_hosts: Collection[str] | None = None,
) -> Dashboard:
    """The dashboard app; see the module docstring.

    ``metrics``: the :class:`ChongmingMetrics` your controller observes (its
    counters then show on ``/metrics``); by default one of its own, which
    shows the store-wide gauges. ``actor`` is who the history names for the
    dashboard's stop / pause / resume. ``num_buckets``, ``owned_buckets`` and
    ``owner`` configure the controller opened on a store location (what
    reconcile judges, and under which name). ``allowed_hosts``: the host
    names it answers to besides the loopback names (``"*"``: any); by
    default loopback names only without a token, any host with one (see
    :mod:`chongming.web.security`).
    """
    need("starlette", "web")
    from chongming.controller.controller import Controller

    target = controller_or_store_location
    if isinstance(target, Controller):
        controller, owns = target, False
        label = describe_store(target.store)
    else:
        label = describe_store(target)
        controller = Controller(
            store=target,
            num_buckets=num_buckets,
            owned_buckets=owned_buckets,
            owner=owner,
        )
        owns = True
    return Dashboard(
        controller,
        owns_controller=owns,
        read_only=read_only,
        guard=Guard(token, allowed_hosts),
        store_label=label,
        metrics=metrics if metrics is not None else ChongmingMetrics(),
        actor=actor,
    )
