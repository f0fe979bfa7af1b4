"""The ``chongming`` command. The full console is its own issue; this is the shell."""

from __future__ import annotations

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="chongming",
    help="Inspect and control chongming tasks.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def root() -> None:
    """chongming: an asyncio-native task runtime."""


@app.command()
def version() -> None:
    """Print the installed version."""
    from importlib.metadata import version as installed_version

    typer.echo(installed_version("chongming"))


def main() -> None:
    app()
