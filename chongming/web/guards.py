"""Each dashboard request through the :class:`~chongming.web.security.Guard`, before its route.

A read needs the token (when one is configured); a write (``POST``) needs it
too, on a dashboard that is not read-only, from the dashboard's own pages
(``Origin``), with a bounded form carrying the CSRF token. ``/login`` trades
the token for the session cookie. A refusal is a page, or JSON under
``/api/``; a store error a route meets is answered 503, never a traceback.
What each route shows is :mod:`chongming.web.app`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from chongming.errors import ChongmingError, TaskNotFound
from chongming.web import board, pages
from chongming.web.responses import html, read_form, secure
from chongming.web.security import COOKIE, Guard, origin_matches

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["Handler", "RequestGuard"]

_log = logging.getLogger("chongming.web")
_CROSS_SITE = "refused: this request did not come from the dashboard's own pages (Origin)"
Handler = Callable[["Request"], Awaitable["Response"]]


class RequestGuard:
    """The dashboard's routes wrapped in its guard: :meth:`read`, :meth:`write`, :meth:`login`."""

    def __init__(self, guard: Guard, *, read_only: bool, store_label: str) -> None:
        self._guard = guard
        self.read_only = read_only
        self._store_label = store_label

    def chrome(self, request: Request) -> pages.Chrome:
        return pages.Chrome(
            base=str(request.scope.get("root_path", "")).rstrip("/"),
            store=self._store_label,
            csrf=self._guard.csrf,
            read_only=self.read_only,
            token_required=self._guard.token_required,
        )

    def _authorized(self, request: Request) -> bool:
        return self._guard.authorized(
            request.cookies.get(COOKIE), request.headers.get("authorization")
        )

    def read(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if not self._authorized(request):
                return self._unauthorized(request)
            return await self._safely(handler, request)

        return guarded

    def write(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if not self._authorized(request):
                return self._refuse(request, 403, "this dashboard needs its token")
            if self.read_only:
                return self._refuse(request, 403, "this dashboard is read-only")
            if not self._same_origin(request, scripts=True):
                return self._refuse(request, 403, _CROSS_SITE)
            form = await read_form(request)
            if form is None:
                return self._refuse(request, 413, "the form is too large")
            if not self._guard.csrf_ok(form.get("csrf")):
                return self._refuse(request, 403, "missing or wrong CSRF token; reload the page")
            request.state.form = form
            return await self._safely(handler, request)

        return guarded

    def _same_origin(self, request: Request, *, scripts: bool) -> bool:
        """A POST from the dashboard's own pages (see chongming.web.security).

        ``scripts``: a request with neither ``Origin`` nor ``Referer`` passes
        when it authenticates with ``Authorization: Bearer`` (not a browser).
        """
        headers = request.headers
        origin, referer = headers.get("origin"), headers.get("referer")
        if origin is None and referer is None:
            bearer = headers.get("authorization", "").lower().startswith("bearer ")
            return scripts and bearer and self._guard.token_required and self._authorized(request)
        return origin_matches(headers.get("host"), origin, referer)

    async def _safely(self, handler: Handler, request: Request) -> Response:
        try:
            return await handler(request)
        except board.BadInput as error:
            return self._refuse(request, 400, str(error))
        except TaskNotFound as error:
            return self._refuse(request, 404, str(error))
        except ChongmingError as error:  # the store's errors are redacted already
            _log.warning("dashboard request failed: %s", error)
            return self._refuse(request, 503, f"{type(error).__name__}: {error}")

    def _unauthorized(self, request: Request) -> Response:
        from starlette.responses import RedirectResponse

        base = self.chrome(request).base
        page = not request.url.path.startswith((f"{base}/fragments/", f"{base}/api/"))
        if page and request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            return secure(RedirectResponse(f"{base}/login", status_code=303))
        return self._refuse(request, 401, "this dashboard needs its token")

    def _refuse(self, request: Request, status: int, message: str) -> Response:
        from starlette.responses import HTMLResponse, JSONResponse

        if request.url.path.startswith(f"{request.scope.get('root_path', '')}/api/"):
            return secure(JSONResponse({"error": message}, status_code=status))
        page = pages.message_page(self.chrome(request), f"{status}", message)
        return secure(HTMLResponse(page, status_code=status))

    async def login(self, request: Request) -> Response:
        from starlette.responses import HTMLResponse, RedirectResponse

        chrome = self.chrome(request)
        if not self._guard.token_required:
            return secure(RedirectResponse(f"{chrome.base}/", status_code=303))
        if request.method == "GET":
            return html(pages.login_page(chrome))
        if not self._same_origin(request, scripts=False):
            return self._refuse(request, 403, _CROSS_SITE)
        form = await read_form(request)
        offered = None if form is None else form.get("token")
        if offered is None or not self._guard.token_matches(offered):
            return secure(HTMLResponse(pages.login_page(chrome, failed=True), status_code=403))
        response = RedirectResponse(f"{chrome.base}/", status_code=303)
        response.set_cookie(
            COOKIE,
            self._guard.session_cookie(),
            httponly=True,
            samesite="strict",
            path=f"{chrome.base}/",
            secure=request.url.scheme == "https",
        )
        return secure(response)
