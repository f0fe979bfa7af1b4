"""``chongming limits``: the cluster-wide limits of a store, their holders, and setting one.

Registered on the same Typer ``app`` as the other commands (imported by
:mod:`chongming.cli.app` at its end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from chongming.cli.app import JsonFlag, _emit, _fail, _options, _run, app

if TYPE_CHECKING:
    from chongming.controller.controller import Controller
    from chongming.stores.limits import ClusterLimit

__all__ = ["limits", "parse_limit"]


def parse_limit(text: str) -> tuple[str, int]:
    """``NAME=N`` as given on the command line."""
    from chongming.cli.session import CliError

    name, sep, number = text.rpartition("=")
    if not sep or not name:
        raise CliError(f"a cluster limit is NAME=N (e.g. vendor-api=3), got {text!r}")
    try:
        capacity = int(number)
    except ValueError:
        raise CliError(f"the capacity of {name!r} must be a whole number, got {number!r}") from None
    if capacity < 1:
        raise CliError(f"the capacity of {name!r} must be at least 1, got {capacity}")
    return name, capacity


@app.command()
def limits(
    ctx: typer.Context,
    set_limit: Annotated[
        list[str] | None,
        typer.Option("--set", help="Create or change a limit: NAME=N (may repeat)."),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Cluster-wide limits: capacity, slots held by live nodes, and who holds them."""
    from chongming.cli.session import CliError

    options = _options(ctx, json_flag)
    try:
        wanted = [parse_limit(text) for text in set_limit or ()]
    except CliError as error:
        _fail(error, options.debug)

    async def action(controller: Controller) -> None:
        store = controller.store
        assert store is not None
        try:
            for name, capacity in wanted:
                await store.set_cluster_limit(name, capacity)
            found = await store.cluster_limits()
        except NotImplementedError:
            raise CliError(f"{type(store).__name__} has no cluster-wide limits") from None
        _emit(options, _as_json(found), lambda: _as_text(found))

    _run(options, action)


def _as_json(found: list[ClusterLimit]) -> dict[str, Any]:
    return {
        "limits": [
            {
                "name": limit.name,
                "capacity": limit.capacity,
                "held": limit.held,
                "free": limit.free,
                "holders": dict(limit.holders),
            }
            for limit in found
        ]
    }


def _as_text(found: list[ClusterLimit]) -> str:
    from chongming.render.table import render_rows

    if not found:
        return "no cluster-wide limits (declare one: Controller(cluster_limits=...) or --set)"
    rows = [
        (
            limit.name,
            str(limit.capacity),
            str(limit.held),
            str(limit.free),
            ", ".join(f"{owner}={held}" for owner, held in sorted(limit.holders.items())) or "-",
        )
        for limit in found
    ]
    return render_rows(("LIMIT", "CAPACITY", "HELD", "FREE", "HOLDERS"), rows)
