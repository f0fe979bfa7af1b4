"""A small HTTP server on the running event loop for probes and scrapes: GET routes only.

``chongming worker`` serves its metrics (``--metrics-port``) and its health
(``--health-port``) with it. Why not ``prometheus_client.start_http_server``
or uvicorn: the first serves from a thread of its own, which would read the
controller's state off the loop (nothing there is thread-safe) and which
nobody closes; the second is a dependency a worker does not otherwise need.
A probe answered on the loop is also the liveness answer itself: a loop that
is stuck answers nothing, and the probe times out.

Each connection carries one request (``Connection: close``) read within
:data:`READ_TIMEOUT` seconds and :data:`MAX_REQUEST` bytes, so a slow or
huge client cannot hold the worker. On a loopback address only loopback
``Host`` names are answered (a page of another site made to resolve to
127.0.0.1 gets 403: DNS rebinding); on another address any ``Host`` is.

Ownership: :meth:`ProbeServer.start` binds (a port in use is a typed
:class:`EndpointError` before anything else happens) and :meth:`aclose`
stops listening, cancels the requests in flight and waits for them: every
connection's task is known here and awaited. Cancellation: ``aclose`` is
safe to call twice and from a cancelled task (it finishes its own waits
shielded).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
from collections.abc import Awaitable, Callable, Mapping

from chongming.errors import ConfigurationError
from chongming.web.security import host_allowed, is_loopback

__all__ = ["EndpointError", "ProbeServer", "Response", "Route"]

READ_TIMEOUT = 5.0
MAX_REQUEST = 8192
_log = logging.getLogger("chongming.worker")


class EndpointError(ConfigurationError, OSError):
    """An endpoint could not listen (port in use, address not on this machine, no permission)."""

    def __init__(self, what: str, host: str, port: int, reason: str) -> None:
        super().__init__(f"{what}: cannot listen on {host}:{port}: {reason}")
        self.what = what
        self.host = host
        self.port = port
        self.reason = reason


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


#: A route answers a GET (or HEAD) of its path, on the loop.
Route = Callable[[], Awaitable[Response]]

_REASONS = {200: "OK", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS |= {400: "Bad Request", 500: "Internal Server Error", 503: "Service Unavailable"}


class ProbeServer:
    """Serves ``routes`` (path -> :data:`Route`) on ``host:port`` (0: any free port)."""

    def __init__(self, what: str, routes: Mapping[str, Route], *, host: str, port: int) -> None:
        self.what = what
        self.routes = dict(routes)
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[object]] = set()
        self._hosts: frozenset[str] | None = frozenset() if is_loopback(host) else None

    @property
    def address(self) -> tuple[str, int]:
        """The bound host and port (the real port after ``port=0``)."""
        if self._server is None or not self._server.sockets:
            return self.host, self.port
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    def url(self, path: str = "/") -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}{path}"

    async def start(self) -> None:
        """Listen; an address that cannot be bound raises :class:`EndpointError`."""
        try:
            self._server = await asyncio.start_server(
                self._connection, self.host, self.port, limit=MAX_REQUEST
            )
        except OSError as error:
            reason = (
                "address already in use"
                if error.errno == errno.EADDRINUSE
                else (error.strerror or str(error))
            )
            raise EndpointError(self.what, self.host, self.port, reason) from None

    async def aclose(self) -> None:
        """Stop listening, cancel the requests in flight and wait for them."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._connections):
            task.cancel()
        while self._connections:
            await asyncio.shield(asyncio.wait(list(self._connections)))
        if server is not None:
            await asyncio.shield(server.wait_closed())

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            if self._server is None:  # accepted as it closed: not answered
                return
            response, head_only = await self._answer(reader)
            reason = _REASONS.get(response.status, "")
            headers = (
                f"HTTP/1.1 {response.status} {reason}\r\n"
                f"Content-Type: {response.content_type}\r\n"
                f"Content-Length: {len(response.body)}\r\n"
                "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
            )
            writer.write(headers.encode("latin-1") + (b"" if head_only else response.body))
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the client went away or sent too much: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            self._connections.discard(task)

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[Response, bool]:
        async with asyncio.timeout(READ_TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _text(400, "bad request\n"), False
        method, target = parts[0], parts[1]
        host = next(
            (
                line.split(":", 1)[1].strip()
                for line in lines[1:]
                if line.lower().startswith("host:")
            ),
            None,
        )
        if not host_allowed(host, self._hosts):
            return _text(403, "this endpoint answers to loopback host names only\n"), False
        if method not in ("GET", "HEAD"):
            return _text(405, "only GET and HEAD\n"), False
        route = self.routes.get(target.split("?", 1)[0])
        if route is None:
            paths = " ".join(sorted(self.routes))
            return _text(404, f"not found; this endpoint serves {paths}\n"), method == "HEAD"
        try:
            return await route(), method == "HEAD"
        except Exception:
            _log.exception("the %s endpoint failed to answer %s", self.what, target)
            return _text(500, "internal error (logged)\n"), method == "HEAD"


def _text(status: int, text: str) -> Response:
    return Response(status=status, body=text.encode())
