"""Defaults a run falls back on: ids, the artifact root, policies, executors."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

from chongming.errors import ConfigurationError
from chongming.executors.base import Executor
from chongming.executors.inline import InlineExecutor
from chongming.executors.thread import ThreadExecutor
from chongming.policies.retry import RetryPolicy
from chongming.policies.windows import ControlWindows
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
_SHARED_THREADS = ThreadExecutor()
_SHARED_INLINE = InlineExecutor()


def new_task_id() -> str:
    """16 hex digits from the OS's randomness: unique enough, short enough for tables."""
    return os.urandom(8).hex()


@functools.cache
def default_artifact_root() -> Path:
    return Path(tempfile.gettempdir()) / "chongming-artifacts"


def resolve_executor(choice: object, spec: TaskSpec) -> Executor | None:
    """The executor for a sync function; ``None`` for a coroutine (runs on the loop)."""
    if spec.is_coroutine:
        return None
    if choice is None or choice == "thread":
        return _SHARED_THREADS
    if choice == "inline":
        return _SHARED_INLINE
    if isinstance(choice, Executor):
        choice.check_target(spec.fn)
        return choice
    raise ConfigurationError(
        f"executor must be 'thread', 'inline' or an Executor instance, got {choice!r}"
    )
