"""Run one function under the runtime, without a controller."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from chongming.clock import Clock
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.outcome import Outcome
from chongming.run.task_run import TaskRun
from chongming.task_api.registry import check_task_name
from chongming.task_api.spec import TaskSpec, durable_needs_store, spec_for

__all__ = ["run_task"]


async def run_task(
    fn: Callable[..., Any],
    *args: Any,
    task_id: str | None = None,
    name: str | None = None,
    label: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    executor: object = None,
    windows: ControlWindows | None = None,
    clock: Clock | None = None,
    artifact_root: Path | None = None,
    **kwargs: Any,
) -> Outcome:
    """Run ``fn(ctx, *args, **kwargs)`` with retries and timeouts; return its outcome.

    ``name``: the task's name in its snapshot and tables (default: the
    function's); ``label`` defaults to it (the seed's ``name="抽取"``).
    Neither is passed to ``fn``: give a ``name`` argument of ``fn`` through
    ``functools.partial``.

    Cancellation: cancelling the caller stops the task (cooperatively, then
    as its carrier allows) before the cancellation propagates.
    """
    spec = fn if isinstance(fn, TaskSpec) else spec_for(fn)
    if spec.durable:
        raise durable_needs_store(spec.name, "run_task")
    async with TaskRun(
        spec,  # resolved once: the run does not look the spec up again
        args,
        kwargs,
        task_id=task_id,
        name=None if name is None else check_task_name(name),
        label=label,
        retry=retry,
        timeout=timeout,
        executor=executor,
        windows=windows,
        clock=clock,
        artifact_root=artifact_root,
    ) as run:
        return await run.wait()
