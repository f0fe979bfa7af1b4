"""The deploy templates (deploy/, docs/deploy.md) say what is true, and run.

Each file is checked for what a validator on this machine can check, and
for agreeing with the command line: every flag it passes is one the
``chongming`` command knows; each grace period outlasts the worker's
``--grace``; each probe asks the port the worker serves its health on.
Where no container runtime runs, the compose file's services are started
as processes with the same commands (ports remapped, the store pointed at
the test's schema), and the systemd unit's ``ExecStart`` is run, killed
with SIGKILL and started again, as ``Restart=on-failure`` does.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml  # type: ignore[import-untyped]

from chongming import Controller, TaskStatus
from chongming.cli.app import app
from chongming.state.triggers import Trigger
from tests.stores.pg_support import drop_schema, fresh_name, require_postgres

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
KUBERNETES = DEPLOY / "kubernetes" / "worker.yaml"
UNIT = DEPLOY / "systemd" / "chongming-worker@.service"
DEADLINE = 60.0


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _kubernetes() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(KUBERNETES.read_text()) if doc]


def _option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def _seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)s", text)
    assert match, text
    return float(match.group(1))


def _known_flags(command: list[str]) -> None:
    """Every ``--flag`` in ``command`` is an option of the group or of its subcommand."""
    group = typer.main.get_command(app)
    commands: Mapping[str, Any] = group.commands  # type: ignore[attr-defined]
    args = command[1:]  # the program name
    names = [a for a in args if not a.startswith("-") and a in commands]
    assert names, f"no chongming command in {command}"
    sub = commands[names[0]]
    known = {o for p in [*group.params, *sub.params] for o in getattr(p, "opts", [])}
    unknown = [a for a in args if a.startswith("--") and a not in known]
    assert not unknown, f"{unknown} are not chongming options ({command})"


# -- the files themselves ------------------------------------------------------


def test_the_compose_file_runs_three_workers_a_dashboard_and_a_service() -> None:
    services = _compose()["services"]
    assert set(services) == {"db", "worker-1", "worker-2", "worker-3", "dashboard", "service"}
    owners = set()
    for name in ("worker-1", "worker-2", "worker-3"):
        worker = services[name]
        command = worker["command"]
        _known_flags(command)
        owners.add(_option(command, "--owner"))
        assert worker["restart"] == "on-failure"
        # SIGTERM, then the grace, then the hand-back: compose must wait longer.
        assert _seconds(worker["stop_grace_period"]) > float(_option(command, "--grace"))
        probe = " ".join(worker["healthcheck"]["test"])
        assert f":{_option(command, '--health-port')}/readyz" in probe
        assert worker["environment"]["CHONGMING_DB"].startswith("postgresql://")
    assert owners == {"worker-1", "worker-2", "worker-3"}  # one owner name per node
    _known_flags(services["dashboard"]["command"])
    assert "CHONGMING_DASHBOARD_TOKEN" in services["dashboard"]["environment"]


def test_the_kubernetes_workers_probe_their_health_port_and_outlast_their_grace() -> None:
    documents = {doc["kind"]: doc for doc in _kubernetes()}
    assert set(documents) == {"Deployment", "PodDisruptionBudget"}
    deployment, budget = documents["Deployment"], documents["PodDisruptionBudget"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    _known_flags(args)
    assert pod["terminationGracePeriodSeconds"] > float(_option(args, "--grace"))
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["health"] == int(_option(args, "--health-port"))
    assert ports["metrics"] == int(_option(args, "--metrics-port"))
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels
    assert budget["spec"]["selector"]["matchLabels"] == labels
    assert budget["spec"]["maxUnavailable"] < deployment["spec"]["replicas"]
    assert "$(POD_NAME)" in args  # the owner name: unique per pod
    assert "POD_NAME" in {variable["name"] for variable in container["env"]}


def _unit_lines() -> dict[str, str]:
    keys: dict[str, str] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            keys[key] = value
    return keys


def _exec_start(instance: str, program: list[str]) -> list[str]:
    words = _unit_lines()["ExecStart"].split()
    words = [w.replace("%i", instance).replace("%H", socket.gethostname()) for w in words]
    assert words[0].endswith("/chongming")
    return [*program, *words[1:]]


def test_the_systemd_unit_restarts_on_failure_and_outlasts_its_grace() -> None:
    keys = _unit_lines()
    command = _exec_start("1", ["chongming"])
    _known_flags(command)
    assert keys["Restart"] == "on-failure"
    assert keys["KillSignal"] == "SIGTERM"
    assert float(keys["TimeoutStopSec"]) > float(_option(command, "--grace"))
    assert "%i" in _option(_unit_lines()["ExecStart"].split(), "--owner")  # one name per instance


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is absent")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    """The unit as systemd reads it: no unknown key, no bad value (paths made local)."""
    text = UNIT.read_text()
    text = text.replace(
        "/srv/app/.venv/bin/chongming", str(Path(sys.executable).parent / "chongming")
    )
    text = text.replace("/etc/chongming/worker.env", str(tmp_path / "worker.env"))
    text = text.replace("/srv/app", str(tmp_path))
    (tmp_path / "worker.env").write_text("CHONGMING_DB=/tmp/none.db\n")
    unit = tmp_path / "chongming-worker@1.service"
    unit.write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


# -- the services, run as processes ------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?message}``."""

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if kind == ":-":
            return rest or ""
        raise AssertionError(f"compose needs {name}: {rest}")

    return re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, value)


class Fleet:
    """The compose services as processes on this host."""

    def __init__(self, tmp_path: Path, dsn: str, schema: str) -> None:
        self.tmp_path = tmp_path
        self.base = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
        self.base |= {
            "CHONGMING_SCHEMA": schema,
            "CHONGMING_DASHBOARD_TOKEN": "deploy-test-token",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "docs" / "examples"), str(ROOT)]),
        }
        self.dsn = dsn
        self.processes: list[subprocess.Popen[bytes]] = []

    def env(self, service: Mapping[str, Any]) -> dict[str, str]:
        env = dict(self.base)
        for key, value in service.get("environment", {}).items():
            env[key] = _interpolate(str(value), self.base)
        env["CHONGMING_DB"] = self.dsn  # the test's server, not the compose network's "db"
        return env

    def command(self, words: list[str], ports: Mapping[str, int]) -> list[str]:
        out = [str(w) for w in words]
        for flag, port in ports.items():
            out[out.index(flag) + 1] = str(port)
        out = ["127.0.0.1" if w == "0.0.0.0" else w for w in out]
        if out[0] == "chongming":
            return [sys.executable, "-m", "chongming", *out[1:]]
        assert out[0] == "python"
        return [sys.executable, *out[1:]]

    def start(
        self, name: str, command: list[str], env: Mapping[str, str]
    ) -> subprocess.Popen[bytes]:
        log = (self.tmp_path / f"{name}.log").open("wb")
        try:
            process = subprocess.Popen(command, cwd=ROOT, env=dict(env), stdout=log, stderr=log)
        finally:
            log.close()
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def finish(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=DEADLINE)


def _get(url: str, headers: Mapping[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


async def _until_answers(url: str, process: subprocess.Popen[bytes], why: str, **kw: Any) -> None:
    async with asyncio.timeout(DEADLINE):
        while await asyncio.to_thread(_get, url, kw.get("headers")) != 200:
            assert process.poll() is None, f"{why} exited with {process.returncode}"
            await asyncio.sleep(0.1)


@pytest.fixture
def postgres_schema() -> Iterator[tuple[str, str]]:
    dsn = require_postgres()
    schema = fresh_name("deploy")
    try:
        yield dsn, schema
    finally:
        asyncio.run(drop_schema(schema))


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.example("fleet_service.py")
async def test_the_compose_services_run_as_processes(
    tmp_path: Path, postgres_schema: tuple[str, str]
) -> None:
    pytest.importorskip("prometheus_client")  # the image installs the metrics extra
    dsn, schema = postgres_schema
    services = _compose()["services"]
    fleet = Fleet(tmp_path, dsn, schema)
    try:
        workers = {}
        for name in ("worker-1", "worker-2", "worker-3"):
            service = services[name]
            ports = {"--metrics-port": _free_port(), "--health-port": _free_port()}
            command = fleet.command(service["command"], ports)
            workers[name] = (fleet.start(name, command, fleet.env(service)), ports)
        for name, (process, ports) in workers.items():
            ready = f"http://127.0.0.1:{ports['--health-port']}/readyz"
            await _until_answers(ready, process, f"{name}: {fleet.log(name)}")
            metrics = f"http://127.0.0.1:{ports['--metrics-port']}/metrics"
            assert await asyncio.to_thread(_get, metrics) == 200
        board = services["dashboard"]
        port = _free_port()
        dashboard = fleet.start(
            "dashboard", fleet.command(board["command"], {"--port": port}), fleet.env(board)
        )
        token = {"Authorization": "Bearer deploy-test-token"}
        await _until_answers(
            f"http://127.0.0.1:{port}/", dashboard, fleet.log("dashboard"), headers=token
        )
        service = services["service"]
        done = await asyncio.to_thread(
            subprocess.run,
            fleet.command(service["command"], {}),
            cwd=ROOT,
            env=fleet.env(service),
            capture_output=True,
            text=True,
            timeout=DEADLINE * 2,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith("20 of 20 succeeded; by worker: ")
        for _name, (process, _ports) in workers.items():
            process.send_signal(signal.SIGTERM)
        codes = [await asyncio.to_thread(p.wait, DEADLINE) for p, _ in workers.values()]
        assert codes == [0, 0, 0]
    finally:
        fleet.finish()


@pytest.mark.example("fleet_tasks.py")
async def test_the_systemd_command_comes_back_after_a_crash_as_the_same_node(
    tmp_path: Path,
) -> None:
    """kill -9 mid-task, then the same ExecStart again (Restart=on-failure): the task ends.

    The restarted process has the instance's owner name, so it takes its dead
    predecessor's lease over at once, judges what that process held (the
    durable task's attempt lost, the task resumed) and replays it from its
    recorded steps; nothing waits for the 30 s lease to lapse. Was: the
    lease was taken over but the task stayed ``running`` under the live
    name with nobody running it, for good.
    """
    db = tmp_path / "tasks.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
    env |= {
        "CHONGMING_DB": str(db),
        "FLEET_STEP_SECONDS": "1.0",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "docs" / "examples"), str(ROOT)]),
    }
    port = _free_port()
    command = _exec_start("1", [sys.executable, "-m", "chongming"])
    command[command.index("--health-port") + 1] = str(port)
    fleet = Fleet(tmp_path, str(db), "unused")
    ready = f"http://127.0.0.1:{port}/readyz"
    try:
        first = fleet.start("first", command, env)
        await _until_answers(ready, first, fleet.log("first"))
        async with Controller(store=db, owner="client", poll_interval=0.05) as client:
            store = client.store
            assert store is not None
            queued = await client.enqueue("sync-tenant", "acme", task_id="sync-acme")
            async with asyncio.timeout(DEADLINE):
                while not await store.steps("sync-acme"):
                    await asyncio.sleep(0.05)  # the first step is recorded: kill mid-task
            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait, DEADLINE)
            again = fleet.start("again", command, env)
            await _until_answers(ready, again, fleet.log("again"))
            final = await queued.wait(timeout=25)  # under the 30 s lease: it was taken over
            history = await client.history("sync-acme")
            steps = await store.steps("sync-acme")
        assert (final.status, final.result) == (
            TaskStatus.SUCCEEDED,
            {"tenant": "acme", "total": 5},
        )
        # Judged at the restart, not after the lease: the lost attempt says why.
        (lost,) = [t for t in history if t.trigger == Trigger.LEASE_EXPIRED]
        assert lost.actor == f"reconcile:{socket.gethostname()}-worker-1"
        assert "taken over" in (lost.reason or ""), lost
        assert Trigger.RESUMED in [t.trigger for t in history]
        assert [s.name for s in steps] == ["part-0", "part-1", "part-2"]
        again.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(again.wait, DEADLINE) == 0
    finally:
        fleet.finish()
