"""What an attempt is given, and whom it reports to.

An :class:`Attempt` sees its run only through these: a frozen
:class:`AttemptPlan` (what to call, with which limits — the same for every
run of one task kind, so it is built once and shared), the run's own inputs
(id, arguments, upstream results), and an :class:`AttemptListener` (where to
report that it is running, paused or finished). The run implements the
listener; nothing else of it is visible.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from chongming.executors.base import Executor
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.state.records import JsonValue, Progress

if TYPE_CHECKING:
    from chongming.run.attempt import Attempt
    from chongming.run.verdict import Verdict

__all__ = ["AttemptInputs", "AttemptListener", "AttemptPlan", "plan_for"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AttemptPlan:
    """What every attempt of one task kind needs; shared by its runs."""

    name: str
    fn: Callable[..., Any]
    executor: Executor | None  # None: a coroutine on the loop
    timeout: Timeout | None
    windows: ControlWindows
    artifact_root: Path
    max_payload_bytes: int | None


class AttemptInputs(NamedTuple):
    """What one run gives each of its attempts (immutable; built once per run).

    A named tuple rather than a frozen dataclass: it is built on every
    submit, and a tuple is built in one step instead of one ``__setattr__``
    per field.
    """

    task_id: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    upstream: Mapping[str, JsonValue] | None = None


# Objects that are compared by identity are held in the entry: their ids stay unique.
_PlanKey = tuple[int, int, Timeout | None, int, int, int | None, str]
_plans: dict[_PlanKey, tuple[tuple[object, ...], AttemptPlan]] = {}
_MAX_PLANS = 512


def plan_for(
    *,
    name: str,
    fn: Callable[..., Any],
    executor: Executor | None,
    timeout: Timeout | None,
    windows: ControlWindows,
    artifact_root: Path,
    max_payload_bytes: int | None,
) -> AttemptPlan:
    """The shared plan for these settings (built once: submit is the hot path).

    Windows and the artifact root are keyed by identity (hashing a frozen
    dataclass or a ``Path`` runs Python code); an equal copy gets a plan of
    its own, which is just as right.
    """
    key = (id(fn), id(executor), timeout, id(windows), id(artifact_root), max_payload_bytes, name)
    entry = _plans.get(key)
    if entry is not None:
        held = entry[0]
        if (
            held[0] is fn
            and held[1] is executor
            and held[2] is windows
            and held[3] is artifact_root
        ):
            return entry[1]
    plan = AttemptPlan(
        name=name,
        fn=fn,
        executor=executor,
        timeout=timeout,
        windows=windows,
        artifact_root=artifact_root,
        max_payload_bytes=max_payload_bytes,
    )
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
    _plans[key] = ((fn, executor, windows, artifact_root), plan)
    return plan


class AttemptListener(Protocol):
    """What an attempt tells its run. All calls happen on the loop thread."""

    def attempt_running(self, attempt: Attempt) -> None:
        """The carrier is calling the function now."""

    def attempt_paused(self, attempt: Attempt, generation: int) -> None:
        """The function parked at a checkpoint for pause request ``generation``."""

    def attempt_ended(self, attempt: Attempt, verdict: Verdict) -> None:
        """The attempt is over; ``verdict`` says what may be recorded. Called once."""

    def report_progress(self, progress: Progress) -> None:
        """Hot path from ``ctx.progress``; may be called from a worker thread."""

    def spawn_attempt(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start the attempt's driver as a task its host owns."""
