"""The commands that load a task module: ``run``, ``tasks`` and ``worker``.

Each imports the one module ``--tasks`` names (see
:mod:`chongming.cli.task_modules`) and never anything else. They register on
the same Typer ``app`` as the query and control commands of
:mod:`chongming.cli.app`, which imports this module once its helpers exist.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from chongming.cli.app import JsonFlag, _emit, _fail, _options, app

__all__ = ["run", "tasks", "worker"]

TasksModule = Annotated[
    str,
    typer.Option(
        "--tasks",
        help="The task module: importable, defines register(controller).",
        show_default=False,
    ),
]


@app.command()
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A task name the module registers.")],
    tasks_module: TasksModule,
    arg: Annotated[
        list[str] | None,
        typer.Option("--arg", help="A keyword argument key=value (JSON if it parses)."),
    ] = None,
    json_args: Annotated[
        str | None, typer.Option("--json-args", help="Keyword arguments as a JSON object.")
    ] = None,
    task_id: Annotated[str | None, typer.Option("--task-id", help="The task id.")] = None,
    bucket_key: Annotated[
        str | None, typer.Option("--bucket-key", help="Key that picks the bucket.")
    ] = None,
    label: Annotated[str | None, typer.Option("--label", help="A label for people.")] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Run one registered task in the foreground until it ends (exit 3 unless it succeeded).

    Ctrl-C asks the task to stop within its grace window; a second Ctrl-C
    forces the stop.
    """
    from chongming.cli.foreground import (
        RunRequest,
        leave_abandoned_threads,
        result_text,
        run_in_foreground,
    )
    from chongming.cli.session import CliError
    from chongming.cli.task_modules import load_task_module, parse_arguments
    from chongming.errors import ChongmingError

    options = _options(ctx, json_flag)
    try:
        kwargs = parse_arguments(arg or [], json_args)
        _check_run_inputs(name, kwargs, task_id, bucket_key, label)
        module = load_task_module(tasks_module)
        request = RunRequest(
            module=module,
            name=name,
            kwargs=kwargs,
            task_id=task_id,
            bucket_key=bucket_key,
            label=label,
        )
        result = run_in_foreground(options, request, live=sys.stdout.isatty())
    except (CliError, ChongmingError, OSError) as error:
        _fail(error, options.debug)
    except KeyboardInterrupt:
        _fail(CliError("interrupted before the task started; nothing runs"), options.debug)
    from chongming.cli import views

    _emit(options, views.status_json(result.snapshot), lambda: result_text(result.snapshot))
    leave_abandoned_threads(result)
    raise typer.Exit(result.exit_code)


def _check_run_inputs(
    name: str,
    kwargs: dict[str, Any],
    task_id: str | None,
    bucket_key: str | None,
    label: str | None,
) -> None:
    """Everything that can be refused before the store is opened (so it stays untouched)."""
    from chongming.cli.session import CliError, check_id
    from chongming.errors import ConfigurationError, PayloadError
    from chongming.state.payload import check_label, json_form_arguments
    from chongming.task_api.registry import check_task_name

    try:
        check_task_name(name)
        if task_id is not None:
            check_id(task_id)
        if label is not None:
            check_label(label)
        if bucket_key is not None and not bucket_key:
            raise CliError("--bucket-key must not be empty")
        json_form_arguments((), kwargs)
    except (ConfigurationError, PayloadError) as error:
        raise CliError(str(error)) from None


@app.command()
def tasks(ctx: typer.Context, tasks_module: TasksModule, json_flag: JsonFlag = False) -> None:
    """List the task names a module registers, with tags, executor and policies."""
    from chongming.cli.session import CliError
    from chongming.cli.task_modules import load_task_module, register_tasks
    from chongming.errors import ChongmingError

    options = _options(ctx, json_flag)

    async def registered() -> list[Any]:
        from chongming.controller.controller import Controller

        async with Controller() as controller:  # in memory: listing touches no store
            await register_tasks(module, controller)
            registry = controller.registry
            return [
                registry.get(name, version)
                for name in registry.names
                for version in registry.versions(name)
            ]

    try:
        module = load_task_module(tasks_module)
        import asyncio

        specs = asyncio.run(registered())
    except (CliError, ChongmingError) as error:
        _fail(error, options.debug)
    from chongming.cli import registry_views

    _emit(
        options,
        registry_views.tasks_json(module.__name__, specs),
        lambda: registry_views.tasks_text(specs),
    )


@app.command()
def worker(
    ctx: typer.Context,
    tasks_module: TasksModule,
    max_parallel: Annotated[
        int, typer.Option("--max-parallel", help="Tasks this worker runs at once.")
    ] = 10,
    grace: Annotated[
        float, typer.Option("--grace", help="Seconds running tasks get to finish on SIGTERM.")
    ] = 30.0,
    cluster_limit: Annotated[
        list[str] | None,
        typer.Option(
            "--cluster-limit",
            help="NAME=N: at most N tasks tagged NAME run at once on the whole store "
            "(the store's capacity wins if it already has one; may repeat).",
        ),
    ] = None,
    rate_limit: Annotated[
        list[str] | None,
        typer.Option(
            "--rate-limit",
            help="NAME=RATE: at most RATE starts of tasks tagged NAME on the whole store, "
            "e.g. vendor-api=10/s or 'vendor-api=600/min burst 20' (the store's limit wins "
            "if it already has one; may repeat).",
        ),
    ] = None,
    names: Annotated[
        str | None,
        typer.Option("--names", help="a,b: claim only these registered task names (a pool)."),
    ] = None,
    tags: Annotated[
        str | None,
        typer.Option("--tags", help="t,u: claim only tasks tagged with one of these (a pool)."),
    ] = None,
    exclude_tags: Annotated[
        str | None,
        typer.Option("--exclude-tags", help="t,u: never claim tasks tagged with one of these."),
    ] = None,
    versions: Annotated[
        str | None,
        typer.Option(
            "--versions", help="name@2,name@3: of these names, claim only these versions."
        ),
    ] = None,
    age_step: Annotated[
        float,
        typer.Option(
            "--age-step",
            help="Seconds of waiting worth one priority level, e.g. 60 (0, the default: "
            "strict priority, no aging).",
        ),
    ] = 0.0,
    lease_ttl: Annotated[
        float,
        typer.Option(
            "--lease-ttl", help="Seconds after its last renewal that peers judge this node dead."
        ),
    ] = 30.0,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", help="Seconds between claims and command polls.")
    ] = 0.2,
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", help="Serve this worker's Prometheus /metrics here."),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics endpoint binds.")
    ] = "127.0.0.1",
    health_port: Annotated[
        int | None, typer.Option("--health-port", help="Serve /livez and /readyz here.")
    ] = None,
    health_host: Annotated[
        str, typer.Option("--health-host", help="Address the health endpoint binds.")
    ] = "127.0.0.1",
    log_format: Annotated[
        str, typer.Option("--log-format", help="text or json (one object per line).")
    ] = "text",
    log_level: Annotated[
        str, typer.Option("--log-level", help="debug, info, warning or error.")
    ] = "info",
    retention: Annotated[
        str | None,
        typer.Option("--retention", help="Prune terminal tasks finished longer ago (e.g. 7d)."),
    ] = None,
    retention_failed: Annotated[
        str | None,
        typer.Option("--retention-failed", help="Keep failed and lost tasks this long instead."),
    ] = None,
) -> None:
    """Claim and run queued tasks the module registers, until SIGTERM or Ctrl-C."""
    from chongming.cli.limit_commands import parse_limit
    from chongming.cli.prune_commands import retention_of
    from chongming.cli.session import CliError
    from chongming.cli.task_modules import load_task_module
    from chongming.cli.worker_command import (
        WorkerSettings,
        check_endpoint,
        check_log_options,
        check_poll_interval,
        run_worker,
    )
    from chongming.cli.worker_options import parse_pool_options, parse_rate_option
    from chongming.errors import ChongmingError

    options = _options(ctx, False)
    try:
        if max_parallel < 1:
            raise CliError(f"--max-parallel must be at least 1, got {max_parallel}")
        if not grace >= 0:
            raise CliError(f"--grace must be a number of seconds >= 0, got {grace}")
        if not lease_ttl > 0:
            raise CliError(f"--lease-ttl must be a number of seconds > 0, got {lease_ttl}")
        limits = dict(parse_limit(text) for text in cluster_limit or ())
        rates = dict(parse_rate_option(text) for text in rate_limit or ())
        pool = parse_pool_options(
            names=names, tags=tags, exclude_tags=exclude_tags, versions=versions, age_step=age_step
        )
        formats = check_log_options(log_format, log_level)
        settings = WorkerSettings(
            max_parallel=max_parallel,
            grace=grace,
            cluster_limits=limits,
            rate_limits=rates,
            pool=pool,
            lease_ttl=lease_ttl,
            poll_interval=check_poll_interval(poll_interval),
            metrics=check_endpoint("--metrics-port", metrics_host, metrics_port),
            health=check_endpoint("--health-port", health_host, health_port),
            log_format=formats[0],
            log_level=formats[1],
            retention=retention_of(retention, retention_failed),
        )
        module = load_task_module(tasks_module)
        code = run_worker(options, module, settings)
    except (CliError, ChongmingError, OSError) as error:
        _fail(error, options.debug)
    raise typer.Exit(code)
