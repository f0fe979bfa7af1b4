"""Defaults a run falls back on: ids, the artifact root, policies, executors."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from chongming.errors import ConfigurationError
from chongming.executors.base import Executor
from chongming.executors.inline import InlineExecutor
from chongming.policies.retry import RetryPolicy
from chongming.policies.windows import ControlWindows
from chongming.state.ids import new_task_id as new_task_id
from chongming.task_api.spec import TaskSpec

__all__ = [
    "DEFAULT_RETRY",
    "DEFAULT_WINDOWS",
    "default_artifact_root",
    "new_task_id",
    "resolve_executor",
]

DEFAULT_WINDOWS = ControlWindows()
DEFAULT_RETRY = RetryPolicy()
_SHARED_INLINE = InlineExecutor()  # stateless: nothing to bound or close


@functools.cache
def default_artifact_root() -> Path:
    import tempfile  # 5 ms of `from chongming import Controller`, for a rare default

    return Path(tempfile.gettempdir()) / "chongming-artifacts"


def resolve_executor(
    choice: object, spec: TaskSpec, threads: Callable[[], Executor]
) -> Executor | None:
    """The executor for a sync function; ``None`` for a coroutine (runs on the loop).

    A name is resolved against the host that runs the task: ``"thread"`` (and
    no choice at all) means the host's own thread executor, ``threads()``, so
    its worker bound holds and it is closed with the host.
    """
    if spec.is_coroutine:
        return None
    if choice is None or choice == "thread":
        return threads()
    if choice == "inline":
        return _SHARED_INLINE
    if choice == "process":
        raise ConfigurationError(
            "executor='process' takes an instance: executor=ProcessExecutor(max_workers=..., "
            "start_method=..., grace=...); worker processes are a resource you size and "
            "close, so none is made implicitly"
        )
    if isinstance(choice, Executor):
        choice.check_target(spec.fn)
        return choice
    raise ConfigurationError(
        f"executor must be 'thread', 'inline' or an Executor instance, got {choice!r}"
    )
