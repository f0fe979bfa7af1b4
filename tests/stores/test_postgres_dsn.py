"""The DSN password never appears in errors, reprs, tracebacks or logs."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback

import pytest

from chongming.errors import ConfigurationError, StoreError, StoreUnavailable
from chongming.stores.postgres import PostgresTaskStore, redact_dsn
from chongming.stores.postgres.dsn import parse_dsn, redact_text
from tests.stores.pg_support import run_script

CANARY = "Canary7x9Q"

#: (DSN, the password it carries) — every form a password can take in a DSN.
FORMS = [
    (f"postgresql://user:{CANARY}@127.0.0.1:1/db", CANARY),
    (f"postgres://user:{CANARY}@127.0.0.1:1/db?sslmode=disable", CANARY),
    (f"postgresql://user@127.0.0.1:1/db?password={CANARY}", CANARY),
    (f"postgresql://user@127.0.0.1:1/db?sslmode=disable&password={CANARY}&x=1", CANARY),
    (f"postgresql://user:pre@{CANARY}@127.0.0.1:1/db", f"pre@{CANARY}"),
    (f"postgresql://user:pre#{CANARY}@127.0.0.1:1/db", f"pre#{CANARY}"),
    (f"postgresql://user:{CANARY}#tail@127.0.0.1:1/db", f"{CANARY}#tail"),
    (f"postgresql://user:pre%40{CANARY}%23@127.0.0.1:1/db", f"pre%40{CANARY}%23"),
    (f"postgresql://user@127.0.0.1:1/db?password=a%23{CANARY}", f"a%23{CANARY}"),
    (f"postgresql://user@127.0.0.1:1/db?password=a#{CANARY}", f"a#{CANARY}"),
    (f"host=127.0.0.1 port=1 user=u password={CANARY} dbname=db", CANARY),
    (f"host=127.0.0.1 port=1 password='{CANARY} with @ # and \\' quote' dbname=db", CANARY),
    (f"password = {CANARY}@x#y host=127.0.0.1 port=1", f"{CANARY}@x#y"),
    (f"postgresql://user:{CANARY}@127.0.0.1:notaport/db", CANARY),
    (f"postgresql://user:{CANARY}@[bad/db", CANARY),
    (f"postgresql://user:ab#{CANARY}@127.0.0.1:5432/db", CANARY),
    (f"host=127.0.0.1 port=x password={CANARY}", CANARY),
    (f"host=127.0.0.1 bogus=1 password={CANARY}", CANARY),
    (f"postgresql://user@127.0.0.1:1/db?sslpassword={CANARY}", CANARY),
]


def _fragments() -> list[str]:
    # Any 5-character piece of the canary counts as a leak, not just the whole.
    return [CANARY[i : i + 5] for i in range(len(CANARY) - 4)]


def assert_clean(text: str) -> None:
    for piece in _fragments():
        assert piece not in text, f"password fragment {piece!r} leaked in: {text!r}"


@pytest.mark.parametrize(("dsn", "password"), FORMS)
def test_redact_dsn_removes_the_password(dsn: str, password: str) -> None:
    redacted = redact_dsn(dsn)
    assert_clean(redacted)
    assert "***" in redacted
    assert_clean(redact_text(f"failed to connect to {dsn} (see logs)"))


def test_redact_dsn_keeps_the_rest_readable() -> None:
    assert redact_dsn("postgresql://u:pw@db.example:5433/app?sslmode=require") == (
        "postgresql://u:***@db.example:5433/app?sslmode=require"
    )
    assert redact_dsn("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_dsn("host=h password='a b' dbname=x") == "host=h password=*** dbname=x"


def test_parse_dsn_collects_every_spelling_of_the_password() -> None:
    target = parse_dsn(f"postgresql://u:pre%40{CANARY}@h/db")
    assert f"pre@{CANARY}" in target.secrets
    assert f"pre%40{CANARY}" in target.secrets
    keyword = parse_dsn(f"host=h port=5 user=u password='{CANARY} x' dbname=d")
    assert keyword.kwargs == {
        "host": "h",
        "port": 5,
        "user": "u",
        "password": f"{CANARY} x",
        "database": "d",
    }


@pytest.mark.parametrize(("dsn", "password"), FORMS)
async def test_failed_connections_never_show_the_password(
    dsn: str, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    try:
        store = PostgresTaskStore(dsn, schema="chongming_never_created", connect_timeout=2)
    except ConfigurationError as error:
        _check_error(error)
        return
    assert_clean(repr(store))
    assert_clean(str(store))
    with pytest.raises((StoreError, ConfigurationError)) as caught:
        await store.get("t")
    _check_error(caught.value)
    await store.close()
    assert_clean(caplog.text)


def _check_error(error: BaseException) -> None:
    assert isinstance(error, (StoreUnavailable, ConfigurationError, StoreError))
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    assert_clean(str(error))
    assert_clean(repr(error))
    assert_clean("".join(traceback.format_exception(error)))


@pytest.mark.postgres
async def test_reachable_server_with_a_wrong_role_shows_no_password() -> None:
    from tests.stores.pg_support import require_postgres

    require_postgres()
    store = PostgresTaskStore(
        f"postgresql://no_such_role_x:{CANARY}@127.0.0.1:5432/test", connect_timeout=3
    )
    with pytest.raises(StoreUnavailable) as caught:
        await store.open()
    _check_error(caught.value)
    await store.close()


async def test_unreachable_host_fails_fast() -> None:
    """A server that accepts TCP but never answers: bounded by connect_timeout."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = PostgresTaskStore(f"postgresql://u:{CANARY}@127.0.0.1:{port}/db", connect_timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.open()
        elapsed = time.monotonic() - started
        assert elapsed < 3.0, elapsed
        _check_error(caught.value)
    finally:
        await store.close()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


def test_importing_chongming_needs_no_asyncpg_and_the_error_names_the_extra() -> None:
    result = run_script(
        """
        import sys
        sys.modules["asyncpg"] = None  # makes "import asyncpg" raise ImportError
        import chongming
        import chongming.stores
        from chongming.stores.postgres import PostgresTaskStore
        from chongming.errors import ConfigurationError
        try:
            PostgresTaskStore("postgresql://u@h/db")
        except ConfigurationError as error:
            print("ERROR:", error)
        else:
            print("no error")
        """,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (
        'ERROR: PostgresTaskStore needs the asyncpg driver: pip install "chongming[postgres]"'
        in (result.stdout)
    )
