"""``chongming worker``: a node that claims and runs the queued tasks its module registers.

It runs until SIGTERM or Ctrl-C. Then it claims nothing more, gives back
what it claimed but has not started, lets running tasks finish within
``--grace`` seconds, and hands back what it still holds (``Controller.close``:
a durable task replays on another worker, another goes back if its retry
policy has an attempt left; the rest is stopped, ``runtime:shutdown``), so
nothing is left owned by a node that is gone.

What an operator sees of it (``docs/worker-operations.md``):

- its own lines on stdout — the start-up line names every setting in force,
  then stopping and stopped — and every log record (its runtime's, its
  tasks', any library's) on stderr, both as ``--log-format text`` or ``json``
  (one object per line), every one redacted (:mod:`chongming.logs`);
- ``--metrics-port``: its own Prometheus metrics on ``/metrics``
  (:mod:`chongming.web.worker_metrics`, needs ``chongming[metrics]``);
- ``--health-port``: ``/livez`` and ``/readyz`` (:mod:`chongming.web.health`).

Both endpoints listen before the store is opened, so a port in use fails the
command before it claims anything. They are served on the worker's own event
loop, owned by it, and closed after the controller on the way out. Nothing of
``prometheus_client`` or the endpoints is imported unless a port is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import signal
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from chongming.cli.session import CliError, Options, open_cli_store
from chongming.cli.task_modules import register_tasks
from chongming.controller.pools import WorkerPool
from chongming.logs.formats import LogFormat, install_handler, json_line, parse_log_format
from chongming.logs.formats import parse_log_level as parse_level
from chongming.logs.records import RedactingFilter
from chongming.stores.rates import RateLimit

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.stores.retention import Retention
    from chongming.web.health import WorkerHealth
    from chongming.web.probe_server import ProbeServer, Response, Route
    from chongming.web.worker_metrics import WorkerMetrics

__all__ = [
    "Endpoint",
    "WorkerSettings",
    "check_endpoint",
    "check_poll_interval",
    "run_worker",
    "startup_fields",
]

POLL_INTERVAL = 0.2
DEFAULT_HOST = "127.0.0.1"
#: Task names of the runtime's own (controller/stored_pipelines.py): not the user's to list.
BUILT_IN_PREFIX = "chongming:"
_LOG_LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning"}
_LOG_LEVEL_NAMES[logging.ERROR] = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """Where an endpoint listens (``port`` 0: any free port, printed at start-up)."""

    host: str = DEFAULT_HOST
    port: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """What the command line says of the worker beyond the shared options."""

    max_parallel: int = 10
    grace: float = 30.0
    cluster_limits: Mapping[str, int] = dataclasses.field(default_factory=dict)
    rate_limits: Mapping[str, RateLimit] = dataclasses.field(default_factory=dict)
    pool: WorkerPool = dataclasses.field(default_factory=WorkerPool)
    lease_ttl: float = 30.0
    poll_interval: float = POLL_INTERVAL
    metrics: Endpoint | None = None
    health: Endpoint | None = None
    log_format: LogFormat = LogFormat.TEXT
    log_level: int = logging.INFO
    retention: Retention | None = None  # docs/retention.md


def check_endpoint(option: str, host: str, port: int | None) -> Endpoint | None:
    """``--metrics-port`` / ``--health-port`` and their host, or a :class:`CliError`."""
    if port is None:
        return None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise CliError(f"{option} must be a port between 0 and 65535, got {port!r}")
    cleaned = host.strip()
    if not cleaned or any(c.isspace() or not c.isprintable() for c in cleaned):
        raise CliError(f"the host of {option} must be an address or a host name, got {host!r}")
    return Endpoint(host=cleaned, port=port)


def check_poll_interval(value: float) -> float:
    """A number of seconds > 0 (finite), or a :class:`CliError`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CliError(f"--poll-interval must be a number of seconds > 0, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise CliError(f"--poll-interval must be a number of seconds > 0, got {value}")
    return float(value)


def check_log_options(log_format: str, log_level: str) -> tuple[LogFormat, int]:
    from chongming.errors import ConfigurationError

    try:
        return parse_log_format(log_format), parse_level(log_level)
    except ConfigurationError as error:
        raise CliError(f"--log-format/--log-level: {error}") from None


def startup_fields(
    controller: Controller,
    settings: WorkerSettings,
    store: str,
    endpoints: Mapping[str, str | None],
) -> dict[str, Any]:
    """Every setting in force, as the start-up line names them (its JSON form too).

    ``serves`` names what the user registered; the node row also lists the
    runtime's own tasks (``chongming:pipeline``), which every worker serves.
    """
    from chongming.scheduler.buckets import format_bucket_ranges

    registry = controller.registry
    serves = [
        name if version is None else f"{name}@{version}"
        for name in registry.names
        for version in registry.versions(name)
        if not name.startswith(BUILT_IN_PREFIX)  # every worker serves those (docs/pipelines.md)
    ]
    owned = controller.owned_buckets
    num_buckets = controller.buckets.num_buckets
    return {
        "owner": controller.owner,
        "serves": serves,
        "max_parallel": settings.max_parallel,
        "cluster_limits": dict(sorted(settings.cluster_limits.items())),
        "rate_limits": {name: str(rate) for name, rate in sorted(settings.rate_limits.items())},
        "pool": settings.pool.describe() or None,
        "lease_ttl": settings.lease_ttl,
        "poll_interval": settings.poll_interval,
        "reconcile_interval": controller.reconcile_interval,
        "grace": settings.grace,
        "num_buckets": num_buckets,
        "owned_buckets": None if owned is None else format_bucket_ranges(owned),
        "store": store,
        "metrics": endpoints.get("metrics"),
        "health": endpoints.get("health"),
        "log_format": settings.log_format.value,
        "log_level": _LOG_LEVEL_NAMES.get(settings.log_level, str(settings.log_level)),
        "redaction": "on",
    }


def startup_text(fields: Mapping[str, Any]) -> str:
    limits = ", ".join(f"{k}={v}" for k, v in fields["cluster_limits"].items()) or "none"
    rates = ", ".join(f"{k}={v}" for k, v in fields.get("rate_limits", {}).items())
    rates = f"rate limits {rates}; " if rates else ""  # named only when set
    if fields.get("pool"):
        rates += f"pool {fields['pool']}; "
    buckets = (
        f"all {fields['num_buckets']}"
        if fields["owned_buckets"] is None
        else f"{fields['owned_buckets']} of {fields['num_buckets']}"
    )
    reconcile = fields["reconcile_interval"]
    return (
        f"worker {fields['owner']} serving {', '.join(fields['serves']) or '(none)'}; "
        f"max_parallel {fields['max_parallel']}; cluster limits {limits}; {rates}"
        f"lease_ttl {fields['lease_ttl']:g}s; poll_interval {fields['poll_interval']:g}s; "
        f"reconcile every {'-' if reconcile is None else f'{reconcile:g}s'}; "
        f"grace {fields['grace']:g}s; buckets {buckets}; store {fields['store']}; "
        f"metrics {fields['metrics'] or 'off'}; health {fields['health'] or 'off'}; "
        f"log {fields['log_format']} {fields['log_level']}, redacted"
    )


class _Lines:
    """The worker's own lines on stdout: plain text, or one JSON object each; redacted."""

    def __init__(self, log_format: LogFormat, redaction: RedactingFilter, out: TextIO) -> None:
        self._format = log_format
        self._redaction = redaction
        self._out = out

    def say(self, text: str, event: str, **fields: Any) -> None:
        record = logging.LogRecord("chongming.worker", logging.INFO, __file__, 0, text, (), None)
        self._redaction.filter(record)
        if self._format is LogFormat.JSON:
            safe = {k: _redacted(v, self._redaction) for k, v in fields.items()}
            line = json_line(record, event=event, **safe)
        else:
            line = record.getMessage()
        self._out.write(line + "\n")
        self._out.flush()


def _redacted(value: Any, redaction: RedactingFilter) -> Any:
    from chongming.logs.redaction import redact_value

    return redact_value(value, redaction.secrets)


def run_worker(options: Options, module: ModuleType, settings: WorkerSettings) -> int:
    return asyncio.run(_serve(options, module, settings))


def _store_secrets(location: str) -> frozenset[str]:
    """Every spelling of the ``--db`` DSN's password (scrubbed from every line)."""
    from chongming.plane.location import describe_location

    if describe_location(location) == location:
        return frozenset()  # nothing redacted: a path, or a DSN without a password
    try:
        from chongming.stores.postgres.dsn import parse_dsn

        return parse_dsn(location).secrets
    except Exception:  # a malformed DSN fails where the store opens; redact_text still masks
        return frozenset()


async def _serve(options: Options, module: ModuleType, settings: WorkerSettings) -> int:
    from chongming.cli.asyncpg_noise import quiet_cancelled_connects
    from chongming.controller.controller import Controller

    quiet_cancelled_connects(asyncio.get_running_loop())
    redaction = RedactingFilter(_store_secrets(options.db))
    lines = _Lines(settings.log_format, redaction, sys.stdout)
    root = logging.getLogger()
    root_level = root.level
    handler = install_handler(
        settings.log_format, stream=sys.stderr, level=settings.log_level, redaction=redaction
    )
    logging.captureWarnings(True)  # Python warnings become records: the same format, redacted
    try:
        async with contextlib.AsyncExitStack() as stack:
            metrics = _metrics_of(settings)
            controller = Controller(
                store=open_cli_store(options, create=True),
                owner=options.owner,
                num_buckets=options.num_buckets,
                owned_buckets=options.owned_buckets,
                max_parallel=settings.max_parallel,
                cluster_limits=settings.cluster_limits,
                rate_limits=settings.rate_limits,
                pool=settings.pool,
                lease_ttl=settings.lease_ttl,
                poll_interval=settings.poll_interval,
                work=True,
                observers=None if metrics is None else metrics.observers(),
                retention=settings.retention,
            )
            if metrics is not None:
                metrics.owner = controller.owner
            health = _health_of(settings, controller)
            # Listening first: a port in use fails the worker before it touches the store.
            endpoints = await _listen(stack, settings, metrics, health)
            stack.push_async_callback(controller.close, close_store=True)
            return await _work(controller, module, settings, lines, health, endpoints, options)
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        root.setLevel(root_level)  # as it was: an in-process caller (a test) keeps its own


def _metrics_of(settings: WorkerSettings) -> WorkerMetrics | None:
    if settings.metrics is None:
        return None
    from chongming.web.worker_metrics import WorkerMetrics

    try:
        return WorkerMetrics(owner="", max_parallel=settings.max_parallel)
    except ImportError as error:  # MissingExtra: the message names the install command
        raise CliError(f"--metrics-port: {error}") from None


def _health_of(settings: WorkerSettings, controller: Controller) -> WorkerHealth | None:
    if settings.health is None:
        return None
    from chongming.web.health import WorkerHealth

    return WorkerHealth(controller)


async def _listen(
    stack: contextlib.AsyncExitStack,
    settings: WorkerSettings,
    metrics: WorkerMetrics | None,
    health: WorkerHealth | None,
) -> dict[str, str | None]:
    """Start the endpoints (one server when both name one address); their URLs by name."""
    wanted: list[tuple[str, Endpoint, dict[str, Route]]] = []
    if settings.metrics is not None and metrics is not None:
        exposition = metrics.exposition

        async def scrape() -> Response:
            from chongming.web.metrics import CONTENT_TYPE
            from chongming.web.probe_server import Response

            return Response(status=200, body=exposition(), content_type=CONTENT_TYPE)

        wanted.append(("metrics", settings.metrics, {"/metrics": scrape}))
    if settings.health is not None and health is not None:
        wanted.append(("health", settings.health, health.routes()))
    if not wanted:
        return {}
    from chongming.web.probe_server import ProbeServer

    servers: dict[tuple[str, int], ProbeServer] = {}
    urls: dict[str, str | None] = {}
    for what, endpoint, routes in wanted:
        key = (endpoint.host, endpoint.port)
        server = servers.get(key) if endpoint.port != 0 else None
        if server is None:
            option = f"--{what}-port"
            server = ProbeServer(
                f"{what} endpoint ({option})", routes, host=endpoint.host, port=endpoint.port
            )
            await server.start()
            stack.push_async_callback(server.aclose)
            servers[key] = server
        else:
            server.routes.update(routes)
        paths = list(routes)
        urls[what] = (
            server.url(paths[0]) if len(paths) == 1 else f"{server.url('')} ({', '.join(paths)})"
        )

    return urls


async def _work(
    controller: Controller,
    module: ModuleType,
    settings: WorkerSettings,
    lines: _Lines,
    health: WorkerHealth | None,
    endpoints: dict[str, str | None],
    options: Options,
) -> int:
    from chongming.plane.location import describe_location

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        stopping.set()

    watched = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal)
            watched.append(sig)
        except (RuntimeError, ValueError, NotImplementedError):
            pass
    grace = settings.grace
    try:
        await register_tasks(module, controller)
        await controller.start()
        if health is not None:
            health.started = True
        fields = startup_fields(controller, settings, describe_location(options.db), endpoints)
        lines.say(startup_text(fields), "started", settings=fields)
        await stopping.wait()
        if health is not None:
            health.stopping = True
        lines.say(
            f"stopping: claiming no more; running tasks have {grace:g}s to finish",
            "stopping",
            grace=grace,
        )
        closing = asyncio.ensure_future(controller.close(grace=grace, close_store=True))
        told = signals
        while not closing.done():
            await asyncio.wait([closing], timeout=0.1)
            if signals > told and not closing.done():
                told = signals
                lines.say(
                    "already stopping: running tasks are stopped when the grace runs out",
                    "stopping",
                )
        closing.result()
    finally:
        for sig in watched:
            loop.remove_signal_handler(sig)
        await controller.close(close_store=True)
    lines.say(f"worker {controller.owner} stopped", "stopped")
    return 0
