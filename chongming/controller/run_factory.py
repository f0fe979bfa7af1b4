"""One factory for the runs a controller makes: submitted here, a pipeline's node, claimed.

What every run of a controller shares (its owner, windows, clock, artifact
root, host and payload limit) is resolved once, here, instead of being
spelled out at each of the three places that build runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chongming.clock import Clock
from chongming.policies.retry import RetryPolicy
from chongming.policies.timeout import Timeout
from chongming.policies.windows import ControlWindows
from chongming.run.plan import AttemptPlan
from chongming.run.task_run import TaskRun
from chongming.state.records import JsonValue, TaskSnapshot
from chongming.task_api.spec import TaskSpec

if TYPE_CHECKING:
    from chongming.controller.host import ControllerHost

__all__ = ["RunFactory"]

#: Specs whose plans a factory keeps (a registry rarely holds more).
_MAX_PLANS = 512


@dataclasses.dataclass(frozen=True, slots=True)
class RunFactory:
    """The per-controller part of every run it makes."""

    owner: str
    windows: ControlWindows
    clock: Clock
    artifact_root: Path | None
    host: ControllerHost
    max_payload_bytes: int | None
    #: The attempt plan of each spec's runs with no timeout of their own, by spec
    #: identity: resolved by the first such run, passed to every later one.
    _plans: dict[int, tuple[TaskSpec, str, AttemptPlan]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    def new(
        self,
        spec: TaskSpec,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any] | None,
        *,
        task_id: str | None,
        name: str,
        label: str | None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        tags: Collection[str] | None = None,
        priority: int | None = None,
        bucket: int | None = None,
        bucket_key: str | None = None,
        upstream: Mapping[str, JsonValue] | None = None,
    ) -> TaskRun:
        """A run of ``spec`` on this controller's host (every check of ``TaskRun`` applies)."""
        plan = None
        if timeout is None:
            known = self._plans.get(id(spec))
            if known is not None and known[0] is spec and known[1] == name:
                plan = known[2]
        run = TaskRun(
            spec,
            args,
            kwargs,
            task_id=task_id,
            name=name,
            label=label,
            retry=retry,
            timeout=timeout,
            executor=spec.executor,
            tags=tags,
            priority=priority,
            bucket=bucket,
            bucket_key=bucket_key,
            owner=self.owner,
            windows=self.windows,
            clock=self.clock,
            artifact_root=self.artifact_root,
            host=self.host,
            max_payload_bytes=self.max_payload_bytes,
            upstream=upstream,
            plan=plan,
        )
        if plan is None and timeout is None:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[id(spec)] = (spec, name, run.plan)
        return run

    def claimed(
        self,
        spec: TaskSpec,
        stored: TaskSnapshot,
        upstream: Mapping[str, JsonValue] | None = None,
    ) -> TaskRun:
        """A local run for a task claimed from the queue (the worker then adopts it).

        ``upstream``: a stored pipeline node's inputs (``ctx.upstream``).
        """
        return self.new(
            spec,
            stored.args,
            stored.kwargs,
            task_id=stored.task_id,
            name=stored.name,
            label=stored.label,
            tags=stored.tags | spec.tags,  # the registration's tags hold wherever it runs
            priority=stored.priority,
            bucket=stored.bucket,
            bucket_key=stored.bucket_key,
            upstream=upstream,
        )
