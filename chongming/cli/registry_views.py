"""What ``chongming tasks`` prints: the task names a module registers, and their policies.

Pure functions from :class:`~chongming.task_api.spec.TaskSpec` records to a
table or a stable JSON object: kind, executor, tags, priority, retry and
timeouts as the module declared them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chongming.cli.cells import NONE
from chongming.render import render_rows
from chongming.task_api.spec import TaskSpec

__all__ = ["tasks_json", "tasks_text"]


def tasks_json(module: str, specs: Sequence[TaskSpec]) -> dict[str, Any]:
    return {"module": module, "tasks": [_spec_json(spec) for spec in specs]}


def _spec_json(spec: TaskSpec) -> dict[str, Any]:
    retry = spec.retry
    timeout = spec.timeout
    return {
        "name": spec.name,
        "version": spec.version,
        "kind": "async" if spec.is_coroutine else "sync",
        "executor": _executor_name(spec),
        "tags": sorted(spec.tags),
        "priority": spec.priority,
        "retry": None
        if retry is None
        else {
            "max_attempts": retry.max_attempts,
            "backoff": type(retry.backoff).__name__,
            "retry_timeouts": retry.retry_timeouts,
        },
        "timeout": None
        if timeout is None
        else {"per_attempt": timeout.per_attempt, "idle": timeout.idle, "start": timeout.start},
    }


def tasks_text(specs: Sequence[TaskSpec]) -> str:
    headers = ("NAME", "KIND", "EXECUTOR", "TAGS", "PRIORITY", "RETRY", "TIMEOUT")
    rows = []
    for spec in specs:
        data = _spec_json(spec)
        retry = data["retry"]
        timeout = data["timeout"]
        rows.append(
            (
                spec.name if spec.version is None else f"{spec.name}@{spec.version}",
                data["kind"],
                data["executor"],
                ",".join(data["tags"]) or NONE,
                str(spec.priority),
                NONE if retry is None else f"{retry['max_attempts']} attempts",
                NONE if timeout is None else _timeouts(timeout),
            )
        )
    return render_rows(headers, rows)


def _executor_name(spec: TaskSpec) -> str:
    choice = spec.executor
    if choice is None:
        return "thread" if not spec.is_coroutine else "loop"
    return choice if isinstance(choice, str) else type(choice).__name__


def _timeouts(timeout: dict[str, float | None]) -> str:
    parts = [f"{key} {value:g}s" for key, value in timeout.items() if value is not None]
    return ", ".join(parts) or NONE
