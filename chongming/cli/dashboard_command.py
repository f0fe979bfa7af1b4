"""``chongming dashboard``: the web dashboard on ``--db``, served by uvicorn.

Safe by default: it binds to 127.0.0.1; a non-loopback ``--host`` needs a
token (``$CHONGMING_DASHBOARD_TOKEN`` or ``--token-file``) or it refuses to
start; it answers only to loopback host names unless a token is set or
``--allowed-host`` names more (DNS rebinding); ``--read-only`` hides and
refuses every control. The dashboard's
controller is query-only, like every other CLI command: it never registers
as a node and never claims commands, so stop / pause / resume travel as
commands to the task's owner exactly as ``chongming stop`` sends them.

Registered on the same Typer ``app`` as the other commands (imported by
:mod:`chongming.cli.app` at its end).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from chongming.cli.app import _fail, _options, app

if TYPE_CHECKING:
    from chongming.cli.session import Options

__all__ = ["dashboard", "serve_dashboard"]


@app.command()
def dashboard(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (loopback unless a token is set).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0: any free port).")] = 8000,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="No controls: every stop/pause/resume is refused.")
    ] = False,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="File whose first line is the access token (else $CHONGMING_DASHBOARD_TOKEN).",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A host name the dashboard answers to besides loopback (repeatable; * any).",
        ),
    ] = None,
) -> None:
    """Serve the web dashboard (tasks, one task, nodes and buckets, reconcile, /metrics)."""
    from chongming.cli.session import CliError
    from chongming.errors import ChongmingError

    options = _options(ctx, False)
    try:
        if not 0 <= port <= 65535:
            raise CliError(f"--port must be between 0 and 65535, got {port}")
        code = serve_dashboard(
            options,
            host=host,
            port=port,
            read_only=read_only,
            token_file=token_file,
            allowed_hosts=allowed_host,
        )
    except (CliError, ChongmingError, OSError, ValueError, ImportError) as error:
        _fail(error, options.debug)
    raise typer.Exit(code)


def serve_dashboard(
    options: Options,
    *,
    host: str,
    port: int,
    read_only: bool,
    token_file: Path | None,
    allowed_hosts: list[str] | None = None,
) -> int:
    """Check the bind, open the store, serve until SIGINT/SIGTERM; the exit code."""
    import asyncio

    from chongming.cli.session import CliError
    from chongming.web.security import InsecureBind, allowed_hosts_for, check_bind, load_token

    try:
        token = load_token(token_file)
        check_bind(host, token)
        allowed_hosts_for(allowed_hosts, token)  # a bad name fails here, before the bind
    except (InsecureBind, ValueError) as error:
        raise CliError(str(error)) from None
    return asyncio.run(_serve(options, host, port, read_only, token, allowed_hosts))


async def _serve(
    options: Options,
    host: str,
    port: int,
    read_only: bool,
    token: str | None,
    allowed_hosts: list[str] | None,
) -> int:
    import asyncio
    import sys

    from chongming.cli.session import open_cli_store
    from chongming.controller.controller import Controller
    from chongming.web.app import create_app, describe_store
    from chongming.web.extras import need

    need("uvicorn", "web")
    import uvicorn

    class Server(uvicorn.Server):
        """Tells when it listens, so the real address (``--port 0``) can be printed."""

        ready = asyncio.Event()

        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets=sockets)
            self.ready.set()

    store = open_cli_store(options)
    controller = Controller(
        store=store,
        owner=options.owner,
        num_buckets=options.num_buckets,
        owned_buckets=options.owned_buckets,
    )
    try:
        await controller.start()  # an unreachable store fails here, before the bind
        dashboard_app = create_app(
            controller, read_only=read_only, token=token, allowed_hosts=allowed_hosts
        )
        config = uvicorn.Config(
            dashboard_app, host=host, port=port, log_level="warning", lifespan="on"
        )
        server = Server(config)
        serving = asyncio.ensure_future(server.serve())
        ready = asyncio.ensure_future(server.ready.wait())
        await asyncio.wait({serving, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()
            shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
            mode = " (read-only)" if read_only else ""
            print(
                f"chongming dashboard on http://{shown}:{bound[1]}/{mode} "
                f"for {describe_store(store)}",
                flush=True,
            )
            sys.stdout.flush()
        await serving
        return 0 if server.started else 1
    finally:
        await controller.close(close_store=True)
