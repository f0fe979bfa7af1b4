"""The probe server: GET routes on the loop, loopback Host names only, typed bind errors, owned."""

from __future__ import annotations

import asyncio
import socket

import pytest

from chongming.errors import ConfigurationError
from chongming.web.probe_server import EndpointError, ProbeServer, Response


async def request(server: ProbeServer, raw: bytes) -> tuple[int, bytes]:
    host, port = server.address
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(raw)
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def get(path: str, host: str = "127.0.0.1", method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


async def hello() -> Response:
    return Response(status=200, body=b"hello\n")


async def test_routes_answer_and_everything_else_is_refused_plainly() -> None:
    server = ProbeServer("probe", {"/hello": hello}, host="127.0.0.1", port=0)
    await server.start()
    try:
        assert await request(server, get("/hello")) == (200, b"hello\n")
        assert await request(server, get("/hello?x=1", host="localhost:9")) == (200, b"hello\n")
        assert await request(server, get("/hello", method="HEAD")) == (200, b"")
        assert (await request(server, get("/nope")))[0] == 404
        assert (await request(server, get("/hello", method="POST")))[0] == 405
        assert (await request(server, b"garbage\r\n\r\n"))[0] == 400
        # DNS rebinding: a page of another site that resolves to 127.0.0.1 is refused
        assert (await request(server, get("/hello", host="evil.example")))[0] == 403
        assert (await request(server, b"GET /hello HTTP/1.1\r\n\r\n"))[0] == 403  # no Host
    finally:
        await server.aclose()


async def test_a_route_that_raises_is_a_500_and_the_server_keeps_serving() -> None:
    async def broken() -> Response:
        raise RuntimeError("boom")

    server = ProbeServer("probe", {"/broken": broken, "/hello": hello}, host="127.0.0.1", port=0)
    await server.start()
    try:
        assert (await request(server, get("/broken")))[0] == 500
        assert await request(server, get("/hello")) == (200, b"hello\n")
    finally:
        await server.aclose()


async def test_a_port_in_use_is_a_typed_error_naming_the_option() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ProbeServer("metrics (--metrics-port)", {}, host="127.0.0.1", port=port)
        with pytest.raises(EndpointError) as caught:
            await server.start()
    error = caught.value
    assert isinstance(error, ConfigurationError)
    assert isinstance(error, OSError)
    assert str(error) == (
        f"metrics (--metrics-port): cannot listen on 127.0.0.1:{port}: address already in use"
    )
    await server.aclose()  # never started: a no-op


async def test_close_cancels_requests_in_flight_and_waits_for_them() -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow() -> Response:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    server = ProbeServer("probe", {"/slow": slow}, host="127.0.0.1", port=0)
    await server.start()
    reader, writer = await asyncio.open_connection(*server.address)
    writer.write(get("/slow"))
    await writer.drain()
    await entered.wait()
    await server.aclose()
    assert cancelled.is_set()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, unanswered
    writer.close()
    await writer.wait_closed()
    await server.aclose()  # twice is fine
    with pytest.raises(OSError):
        await asyncio.open_connection(*server.address)


async def test_a_client_that_sends_too_much_gets_nothing_and_costs_nothing() -> None:
    server = ProbeServer("probe", {"/hello": hello}, host="127.0.0.1", port=0)
    await server.start()
    try:
        host, port = server.address
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /hello HTTP/1.1\r\nX: " + b"a" * 20_000)
        await writer.drain()
        assert await reader.read() == b""
        writer.close()
        await writer.wait_closed()
        assert await request(server, get("/hello")) == (200, b"hello\n")
    finally:
        await server.aclose()


async def test_any_host_name_is_answered_on_a_non_loopback_bind() -> None:
    server = ProbeServer("probe", {"/hello": hello}, host="0.0.0.0", port=0)
    await server.start()
    try:
        port = server.address[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(get("/hello", host=f"worker-3.internal:{port}"))
        await writer.drain()
        assert (await reader.read()).startswith(b"HTTP/1.1 200 OK")
        writer.close()
        await writer.wait_closed()
    finally:
        await server.aclose()
