"""Shared PostgreSQL helpers for the store tests (a plain module, not a conftest).

- ``CHONGMING_TEST_POSTGRES``: the DSN (default: the local trust-auth server).
- ``CHONGMING_REQUIRE_POSTGRES=1`` (CI): an unreachable server FAILS the tests;
  without it they are skipped with the reason.

Every store a test makes gets its own schema and an ``application_name``
unique to the test run, so a leak check can count exactly its connections in
``pg_stat_activity`` after the store is closed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

DSN = os.environ.get("CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRED = os.environ.get("CHONGMING_REQUIRE_POSTGRES", "") not in ("", "0")
RUN_TOKEN = secrets.token_hex(3)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_reachable: tuple[bool, str] | None = None


def _probe() -> tuple[bool, str]:
    try:
        import asyncpg  # type: ignore[import-untyped]
    except ImportError:
        return False, 'asyncpg is not installed (pip install "chongming[postgres]")'

    async def connect() -> None:
        conn = await asyncpg.connect(DSN, timeout=3)
        await conn.close()

    outcome: list[BaseException | None] = []

    def run() -> None:  # in a thread: the caller may be inside a running loop
        try:
            asyncio.run(connect())
        except Exception as error:
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    error = outcome[0] if outcome else TimeoutError("no answer within 10 s")
    if error is not None:
        from chongming.stores.postgres.dsn import redact_text

        return False, redact_text(f"{type(error).__name__}: {error}")
    return True, ""


def require_postgres() -> str:
    """The DSN, or skip (fail when CHONGMING_REQUIRE_POSTGRES is set) if unreachable."""
    global _reachable
    if _reachable is None:
        _reachable = _probe()
    ok, why = _reachable
    if not ok:
        from chongming.stores.postgres.dsn import redact_dsn

        message = f"PostgreSQL at {redact_dsn(DSN)} is unreachable: {why}"
        if REQUIRED:
            pytest.fail(f"{message} (CHONGMING_REQUIRE_POSTGRES is set)", pytrace=False)
        pytest.skip(f"{message}; set CHONGMING_TEST_POSTGRES or start the server")
    return DSN


def fresh_name(kind: str = "s") -> str:
    """A unique identifier for this run: schemas, roles, application names."""
    return f"chongming_test_{RUN_TOKEN}_{kind}{secrets.token_hex(4)}"


async def admin() -> Any:
    import asyncpg

    return await asyncpg.connect(DSN, timeout=5)


@asynccontextmanager
async def admin_connection() -> AsyncIterator[Any]:
    conn = await admin()
    try:
        yield conn
    finally:
        await conn.close()


async def drop_schema(schema: str) -> None:
    async with admin_connection() as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def backend_pids(application_name: str) -> list[int]:
    async with admin_connection() as conn:
        found = await conn.fetch(
            "SELECT pid FROM pg_stat_activity"
            " WHERE application_name = $1 AND pid <> pg_backend_pid()",
            application_name,
        )
    return [row["pid"] for row in found]


async def wait_connections_gone(application_name: str, timeout: float = 5.0) -> list[int]:
    """Poll until no backend carries ``application_name``; return what is left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        pids = await backend_pids(application_name)
        if not pids or loop.time() > deadline:
            return pids
        await asyncio.sleep(0.05)


async def assert_no_leak(application_name: str) -> None:
    left = await wait_connections_gone(application_name)
    assert not left, f"{len(left)} connection(s) named {application_name!r} leaked: {left}"


@dataclasses.dataclass(slots=True)
class PgStoreFactory:
    """Makes stores in fresh schemas; ``cleanup`` closes, checks leaks, drops schemas."""

    dsn: str
    application_name: str = dataclasses.field(default_factory=lambda: fresh_name("app"))
    schemas: list[str] = dataclasses.field(default_factory=list)
    stores: list[Any] = dataclasses.field(default_factory=list)

    def make(self, *, schema: str | None = None, dsn: str | None = None, **options: Any) -> Any:
        from chongming.stores.postgres import PostgresTaskStore

        if schema is None:
            schema = fresh_name("s")
        if schema not in self.schemas:
            self.schemas.append(schema)
        options.setdefault("application_name", self.application_name)
        options.setdefault("max_size", 4)
        store = PostgresTaskStore(dsn or self.dsn, schema=schema, **options)
        self.stores.append(store)
        return store

    async def cleanup(self, *, check_leaks: bool = True) -> None:
        for store in self.stores:
            await store.close()
        try:
            if check_leaks:
                await assert_no_leak(self.application_name)
        finally:
            for schema in self.schemas:
                await drop_schema(schema)


def run_script(
    source: str, *args: str, timeout: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh Python process (bounded), with the repo importable."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO, **(env or {})},
        check=False,
    )


def spawn_script(
    source: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(source), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO, **(env or {})},
    )


def finish(
    processes: Sequence[subprocess.Popen[str]], timeout: float
) -> list[tuple[int, str, str]]:
    """Wait for every process until one shared deadline; kill the rest. (code, out, err)."""
    import time

    deadline = time.monotonic() + timeout
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            err += "\n[killed: timed out]"
        results.append((process.returncode, out, err))
    return results


class TcpProxy:
    """An in-test TCP proxy in front of PostgreSQL that can cut one exchange.

    ``drop_next_reply()``: the next request goes through (so the server runs and
    commits it) but its reply is thrown away and the connection cut — the
    ambiguous failure a write must resolve by re-reading.
    ``drop_next_request()``: the next request never reaches the server.
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.cuts = 0
        self._mode: str | None = None
        self._request_seen = False
        self._server: asyncio.AbstractServer | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def dsn(self, base: str) -> str:
        scheme, rest = base.split("://", 1)
        userinfo, hostpart = rest.rsplit("@", 1) if "@" in rest else ("", rest)
        path = hostpart.split("/", 1)[1] if "/" in hostpart else ""
        prefix = f"{userinfo}@" if userinfo else ""
        return f"{scheme}://{prefix}127.0.0.1:{self.port}/{path}"

    def drop_next_reply(self) -> None:
        self._mode, self._request_seen = "reply", False

    def drop_next_request(self) -> None:
        self._mode, self._request_seen = "request", False

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._pumps):
            task.cancel()
        if self._pumps:
            await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        pair = [writer, up_writer]
        self._writers.extend(pair)
        for task in (
            asyncio.create_task(self._pump(reader, up_writer, pair, upstream=True)),
            asyncio.create_task(self._pump(up_reader, writer, pair, upstream=False)),
        ):
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pair: list[asyncio.StreamWriter],
        *,
        upstream: bool,
    ) -> None:
        try:
            while data := await reader.read(65536):
                if upstream and self._mode == "request":
                    self._cut(pair)
                    return
                if upstream and self._mode == "reply":
                    self._request_seen = True
                elif not upstream and self._mode == "reply" and self._request_seen:
                    self._cut(pair)
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            for side in pair:
                side.close()

    def _cut(self, pair: list[asyncio.StreamWriter]) -> None:
        self._mode, self._request_seen = None, False
        self.cuts += 1
        for side in pair:
            transport = side.transport
            transport.abort()


async def reread(store: Any, task_id: str) -> Any:
    """The stored snapshot, retrying while the server is away (a write's outcome is unknown)."""
    from chongming.errors import StoreUnavailable

    while True:
        try:
            stored = await store.get(task_id)
        except StoreUnavailable:
            await asyncio.sleep(0.05)
            continue
        assert stored is not None
        return stored
