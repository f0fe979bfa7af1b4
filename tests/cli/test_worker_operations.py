"""``chongming worker`` as operators run it: metrics, health, JSON logs, redaction, bad input.

Each test starts a real worker process and waits on what it prints or
serves (never on a sleep); the endpoints bind port 0 and the start-up line
says where they are.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chongming import Controller, TaskStatus
from tests.cli.support import assert_one_line_error, invoke
from tests.cli.worker_ops_tasks import CANARY

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0
TASKS = "tests.cli.worker_ops_tasks"


class Stream:
    """Whole lines from one unbuffered pipe of a process, each waited for with a deadline."""

    def __init__(self, pipe: Any) -> None:
        self._fd = pipe.fileno()
        self._buffer = b""
        self.closed = False

    def next(self, timeout: float = DEADLINE) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no line within {timeout}s (so far {self._buffer!r})"
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready:
                chunk = os.read(self._fd, 65536)
                assert chunk, f"the stream ended (so far {self._buffer!r})"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def rest(self) -> list[str]:
        """Every line up to the end of the stream (the process has exited)."""
        while True:
            chunk = os.read(self._fd, 65536)
            if not chunk:
                break
            self._buffer += chunk
        lines = self._buffer.decode().splitlines()
        self._buffer = b""
        return lines


def start(db: Path | list[str], *args: str, owner: str = "ops-1") -> subprocess.Popen[bytes]:
    """A worker on ``db`` (a path, or the global options naming a store)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CHONGMING_DB", "CHONGMING_SCHEMA")}
    env["PYTHONPATH"] = str(ROOT)
    where = db if isinstance(db, list) else ["--db", str(db)]
    command = ["worker", "--tasks", TASKS, "--poll-interval", "0.05", *args]
    return subprocess.Popen(
        [sys.executable, "-m", "chongming", *where, "--owner", owner, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
        env=env,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=DEADLINE)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = fetch(url)
    assert status == 200
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_json_worker_serves_metrics_and_health_and_logs_redacted_objects(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    db = tmp_path / "tasks.db"
    worker = start(
        db, "--max-parallel", "3", "--lease-ttl", "6", "--metrics-port", "0",
        "--health-port", "0", "--log-format", "json",
    )  # fmt: skip
    processes.append(worker)
    out, err = Stream(worker.stdout), Stream(worker.stderr)
    started = json.loads(await asyncio.to_thread(out.next))
    assert (started["event"], started["logger"], started["level"]) == (
        "started",
        "chongming.worker",
        "info",
    )
    settings = started["settings"]
    assert {k: settings[k] for k in ("owner", "serves", "max_parallel", "lease_ttl")} == {
        "owner": "ops-1",
        "serves": ["block_loop", "double", "hold", "leaky"],
        "max_parallel": 3,
        "lease_ttl": 6.0,
    }
    assert (settings["poll_interval"], settings["grace"], settings["log_format"]) == (
        0.05,
        30.0,
        "json",
    )
    assert (settings["num_buckets"], settings["owned_buckets"]) == (64, None)
    assert settings["store"] == str(db)
    assert settings["metrics"].startswith("http://127.0.0.1:")
    assert settings["metrics"].endswith("/metrics")
    health = settings["health"].split()[0]
    assert settings["health"] == f"{health} (/livez, /readyz)"
    assert started["message"].startswith("worker ops-1 serving block_loop, double, hold, leaky;")

    assert await asyncio.to_thread(fetch, f"{health}/livez") == (
        200,
        '{"live": true, "owner": "ops-1"}\n',
    )
    status, body = await asyncio.to_thread(fetch, f"{health}/readyz")
    assert (status, json.loads(body)["lease"]) == (200, "held")

    async with Controller(store=db, owner="client") as client:
        queued = [await client.enqueue("double", n, task_id=f"d-{n}") for n in range(5)]
        queued.append(await client.enqueue("leaky", task_id="leak-1"))
        finals = [await task.wait(timeout=DEADLINE) for task in queued]
    assert [f.status for f in finals] == [TaskStatus.SUCCEEDED] * 6

    found = await asyncio.to_thread(scrape, settings["metrics"])

    def value(metric: str, **labels: str) -> float:
        return found[(metric, tuple(sorted(labels.items())))]

    assert value("chongming_worker_claims_total") == 6
    assert value("chongming_worker_starts_total") == 6
    assert value("chongming_worker_ends_total", status="succeeded") == 6
    assert value("chongming_worker_ends_total", status="failed") == 0
    assert (value("chongming_worker_slots_used"), value("chongming_worker_slots_free")) == (0, 3)
    assert (
        value("chongming_attempt_duration_seconds_count", name="double", outcome="succeeded") == 5
    )
    assert value("chongming_store_write_seconds_count") >= 1
    assert value("chongming_lease_renewals_total") >= 0

    worker.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(worker.wait, DEADLINE) == 0
    rest = [json.loads(line) for line in out.rest()]
    assert [line["event"] for line in rest] == ["stopping", "stopped"]
    assert rest[-1]["message"] == "worker ops-1 stopped"
    logged = err.rest()
    records = [json.loads(line) for line in logged]  # every line one object
    assert CANARY not in "\n".join(logged)
    task_lines = [r for r in records if r.get("task_id") == "leak-1"]
    assert [r["message"] for r in task_lines] == [
        "connecting to postgresql://app:***@db.internal/orders",
        "calling https://api.example.com/charge?api_key=***&amount=***",
        "with headers",
        "the charge failed",
    ]
    assert task_lines[2]["authorization"] == "***"
    assert "PermissionError: token=*** was refused" in task_lines[3]["exception"]
    with pytest.raises(OSError):  # the endpoints closed with the worker
        socket.create_connection(("127.0.0.1", int(health.rsplit(":", 1)[1])), timeout=2)


async def test_text_worker_names_every_setting_and_serves_both_on_one_port(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    db = tmp_path / "tasks.db"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = start(
        db, "--metrics-port", str(port), "--health-port", str(port), "--grace", "2",
        "--cluster-limit", "io=2", "--log-level", "warning",
    )  # fmt: skip
    processes.append(worker)
    out = Stream(worker.stdout)
    line = await asyncio.to_thread(out.next)
    assert line == (
        "worker ops-1 serving block_loop, double, hold, leaky; max_parallel 10; "
        "cluster limits io=2; lease_ttl 30s; poll_interval 0.05s; reconcile every 30s; "
        "grace 2s; buckets all 64; "
        f"store {db}; metrics http://127.0.0.1:{port}/metrics; "
        f"health http://127.0.0.1:{port} (/livez, /readyz); log text warning, redacted"
    )
    assert (await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/readyz"))[0] == 200
    assert (
        "chongming_worker_claims_total 0.0"
        in (await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/metrics"))[1]
    )
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(worker.wait, DEADLINE) == 0
    assert out.rest()[-1] == "worker ops-1 stopped"


@pytest.mark.postgres
async def test_a_dsn_password_is_never_printed_by_the_worker(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    from tests.stores.pg_support import drop_schema, fresh_name, require_postgres

    base = require_postgres()
    assert base.startswith("postgresql://postgres@")
    dsn = base.replace("postgresql://postgres@", f"postgresql://postgres:{CANARY}@", 1)
    schema = fresh_name("ops")  # trust auth: the password is ignored, but shown nowhere
    worker = start(
        ["--db", dsn, "--schema", schema], "--log-format", "json", "--log-level", "debug",
        owner="pg-ops",
    )  # fmt: skip
    processes.append(worker)
    try:
        out, err = Stream(worker.stdout), Stream(worker.stderr)
        started = json.loads(await asyncio.to_thread(out.next))
        assert started["settings"]["store"].startswith("postgresql://postgres:***@")
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait, DEADLINE) == 0
        printed = "\n".join([json.dumps(started), *out.rest(), *err.rest()])
        assert CANARY not in printed
    finally:
        await drop_schema(schema)


def test_bad_operations_options_are_refused_and_touch_nothing(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    base = ["worker", "--tasks", TASKS]
    for args, names in (
        (["--metrics-port", "70000"], "--metrics-port must be a port between 0 and 65535"),
        (["--health-port", "-1"], "--health-port must be a port between 0 and 65535"),
        (["--log-format", "xml"], "unknown log format 'xml': choose one of text, json"),
        (["--log-level", "loud"], "unknown log level 'loud'"),
        (["--poll-interval", "-1"], "--poll-interval must be a number of seconds > 0, got -1.0"),
        (["--poll-interval", "0"], "--poll-interval must be a number of seconds > 0"),
        (["--poll-interval", "nan"], "--poll-interval must be a number of seconds > 0"),
        (["--health-port", "0", "--health-host", " "], "the host of --health-port"),
    ):
        line = assert_one_line_error(invoke(db, *base, *args))
        assert names in line, (args, line)
    assert not db.exists()


async def test_a_port_in_use_fails_the_worker_before_it_claims_anything(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    async with Controller(store=db, owner="client") as client:
        await client.enqueue("double", 4, task_id="waiting")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = await asyncio.to_thread(
            invoke, db, "--owner", "ops-x", "worker", "--tasks", TASKS, "--health-port", str(port)
        )
    line = assert_one_line_error(result)
    assert line == (
        "chongming: error: health endpoint (--health-port): cannot listen on "
        f"127.0.0.1:{port}: address already in use"
    )
    async with Controller(store=db, owner="client") as client:
        stored = await client.get("waiting")
        assert (stored.status, stored.owner) == (TaskStatus.QUEUED, None)
        assert await client.nodes() == []  # it never registered as a node


def fetch_within(url: str, seconds: float) -> tuple[int, str] | None:
    """``fetch`` with a short timeout; ``None`` if nothing answered in time."""
    try:
        with urllib.request.urlopen(url, timeout=seconds) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()
    except (TimeoutError, urllib.error.URLError):
        return None


async def test_liveness_fails_while_the_loop_is_blocked_and_readiness_while_stopping(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    db = tmp_path / "tasks.db"
    worker = start(db, "--health-port", "0", "--grace", "20", "--log-format", "json")
    processes.append(worker)
    out = Stream(worker.stdout)
    health = json.loads(await asyncio.to_thread(out.next))["settings"]["health"].split()[0]
    marker, release = tmp_path / "blocking", tmp_path / "release"
    async with Controller(store=db, owner="client") as client:
        blocking = await client.enqueue("block_loop", str(marker), str(release))
        while not marker.exists():
            await asyncio.sleep(0.02)
        # the loop does not turn: nothing answers, so the probe's own timeout fails it
        assert await asyncio.to_thread(fetch_within, f"{health}/livez", 1.0) is None
        release.touch()
        assert (await blocking.wait(timeout=DEADLINE)).result == "unblocked"
        assert await asyncio.to_thread(fetch_within, f"{health}/livez", 10.0) == (
            200,
            '{"live": true, "owner": "ops-1"}\n',
        )
        # stopping: still alive and serving, no longer ready, until the running task ends
        held = await client.enqueue("hold", str(tmp_path / "let-go"))
        while (await held.get()).status is not TaskStatus.RUNNING:
            await asyncio.sleep(0.02)
        assert (await asyncio.to_thread(fetch, f"{health}/readyz"))[0] == 200
        worker.send_signal(signal.SIGTERM)
        assert json.loads(await asyncio.to_thread(out.next))["event"] == "stopping"
        status, body = await asyncio.to_thread(fetch, f"{health}/readyz")
        assert (status, json.loads(body)["reasons"]) == (503, ["stopping: claims nothing more"])
        assert (await asyncio.to_thread(fetch, f"{health}/livez"))[0] == 200
        (tmp_path / "let-go").touch()
        assert (await held.wait(timeout=DEADLINE)).result == "released"
    assert await asyncio.to_thread(worker.wait, DEADLINE) == 0
