"""What every dashboard response carries, and how a request's form and headers are read.

Each response goes out through :func:`secure`: the security headers of
:mod:`chongming.web.security` (the CSP, no framing, no caching of pages)
unless the response set its own. A form is read with a size bound, since a
``POST`` comes before anyone is known to be allowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from chongming.web.security import SECURITY_HEADERS

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import Scope

__all__ = ["MAX_FORM", "asset", "header", "html", "read_form", "secure"]

#: The largest form a request may post (bytes): the pages post a few fields.
MAX_FORM = 16 * 1024


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def read_form(request: Request) -> dict[str, str] | None:
    """An url-encoded form (what the pages post), at most 16 KiB; ``None`` when larger."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return {}
    return dict(parse_qsl(text, keep_blank_values=True))


def secure(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def html(markup: str) -> Response:
    from starlette.responses import HTMLResponse

    return secure(HTMLResponse(markup))


def asset(response: Response) -> Response:
    response.headers["cache-control"] = "public, max-age=300"
    response.headers["x-content-type-options"] = "nosniff"
    return response
