"""``chongming worker``: a node that claims and runs the queued tasks its module registers.

It runs until SIGTERM or Ctrl-C. Then it claims nothing more, gives back
what it claimed but has not started, lets running tasks finish within
``--grace`` seconds, and hands back what it still holds (``Controller.close``:
a durable task replays on another worker, another goes back if its retry
policy has an attempt left; the rest is stopped, ``runtime:shutdown``), so
nothing is left owned by a node that is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
from collections.abc import Mapping
from types import ModuleType

from chongming.cli.session import Options, open_cli_store
from chongming.cli.task_modules import register_tasks

__all__ = ["WorkerSettings", "run_worker"]

POLL_INTERVAL = 0.2


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """What the command line says of the worker beyond the shared options."""

    max_parallel: int = 10
    grace: float = 30.0
    cluster_limits: Mapping[str, int] = dataclasses.field(default_factory=dict)
    lease_ttl: float = 30.0


def run_worker(options: Options, module: ModuleType, settings: WorkerSettings) -> int:
    return asyncio.run(_serve(options, module, settings))


async def _serve(options: Options, module: ModuleType, settings: WorkerSettings) -> int:
    from chongming.controller.controller import Controller

    max_parallel, grace = settings.max_parallel, settings.grace
    controller = Controller(
        store=open_cli_store(options, create=True),
        owner=options.owner,
        num_buckets=options.num_buckets,
        owned_buckets=options.owned_buckets,
        max_parallel=max_parallel,
        cluster_limits=settings.cluster_limits,
        lease_ttl=settings.lease_ttl,
        poll_interval=POLL_INTERVAL,
        work=True,
    )
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
    try:
        await register_tasks(module, controller)
        names = ", ".join(controller.registry.names) or "(none)"
        await controller.start()
        _say(f"worker {controller.owner} serving {names}; max_parallel {max_parallel}")
        await stopping.wait()
        _say(f"stopping: claiming no more; running tasks have {grace:g}s to finish")
        closing = asyncio.ensure_future(controller.close(grace=grace, close_store=True))
        told = signals
        while not closing.done():
            await asyncio.wait([closing], timeout=0.1)
            if signals > told and not closing.done():
                told = signals
                _say("already stopping: running tasks are stopped when the grace runs out")
        closing.result()
    finally:
        for sig in watched:
            loop.remove_signal_handler(sig)
        await controller.close(close_store=True)
    _say(f"worker {controller.owner} stopped")
    return 0


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
