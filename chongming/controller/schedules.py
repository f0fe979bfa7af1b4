"""Schedules on the controller: ``schedule()`` and friends, and the worker's scheduler loop.

``Controller.schedule(name, cron=... | every=..., args=, kwargs=, key=,
timezone=, catch_up=)`` checks everything first (the cadence, the zone, the
policy, the task name, the arguments), then stores the schedule; nothing is
written when a check fails. ``@task(schedule="*/5 * * * *", timezone=...)``
declares one in code: every worker that registers the task puts it at start
(a restart with the same definition keeps the stored one and its
``next_fire``). Which worker fires a tick does not matter: see
:mod:`chongming.schedules.loop` and docs/schedules.md.

The schedule modules (cron parsing, zones, the loop) are imported where they
are used: a controller that never schedules does not pay 14 ms to import them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from chongming.clock import Clock
from chongming.controller.enqueue import EnqueueRequest, build_enqueued
from chongming.controller.queued import QueuedTask
from chongming.errors import (
    ConfigurationError,
    PayloadError,
    ScheduleInvalid,
    UnknownSchedule,
    UnknownTask,
)
from chongming.state.payload import json_form_arguments
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.nodes import served_by_live_nodes
from chongming.stores.schedules import ScheduleRecord  # at run time: the API's hints name it
from chongming.task_api.registry import TaskRegistry

if TYPE_CHECKING:
    from chongming.controller.worker import Worker
    from chongming.plane.plane import ControlPlane
    from chongming.schedules.loop import ScheduleDraft, ScheduleLoop
    from chongming.stores.base import TaskStore

__all__ = ["ScheduleCalls", "declared_schedules", "schedule_loop_for", "supports_schedules"]


def supports_schedules(store: TaskStore) -> bool:
    from chongming.stores.base import TaskStore

    return type(store).fire_schedule is not TaskStore.fire_schedule


def tick_builder(
    registry: TaskRegistry, clock: Clock, limit: int | None
) -> Any:  # BuildTick, kept loose for the partial below
    from chongming.stores.schedules import tick_key

    def build(record: ScheduleRecord, tick: datetime) -> tuple[TaskSnapshot, Transition]:
        request = EnqueueRequest(
            name=record.task_name,
            args=tuple(record.args),
            kwargs=dict(record.kwargs),
            label=record.key,
            idempotency_key=tick_key(record.key, tick),
        )
        return build_enqueued(request, registry, clock, limit)

    return build


def declared_schedules(registry: TaskRegistry) -> list[ScheduleDraft]:
    """The ``@task(schedule=...)`` schedules of what ``registry`` holds (keyed by task name)."""
    from chongming.schedules.cadence import make_cadence
    from chongming.schedules.loop import ScheduleDraft

    drafts = []
    for name in sorted(registry):
        spec = registry.get(name)
        cron = getattr(spec, "schedule", None)
        if cron is None:
            continue
        zone = getattr(spec, "timezone", None) or "UTC"
        drafts.append(
            ScheduleDraft(key=name, task_name=name, cadence=make_cadence(cron=cron, timezone=zone))
        )
    return drafts


def schedule_loop_for(
    store: TaskStore, registry: TaskRegistry, clock: Clock, limit: int | None
) -> ScheduleLoop | None:
    """A worker's scheduler loop, or ``None`` when its store keeps no schedules."""
    if not supports_schedules(store):
        return None
    from chongming.schedules.loop import ScheduleLoop

    return ScheduleLoop(
        store, tick_builder(registry, clock, limit), declared=lambda: declared_schedules(registry)
    )


class ScheduleCalls:
    """The schedule methods, a mixin of :class:`~chongming.controller.Controller`."""

    registry: TaskRegistry
    clock: Clock
    max_payload_bytes: int | None
    _worker: Worker | None

    if TYPE_CHECKING:  # the controller's

        async def _open(self) -> None: ...

        def _require_plane(self, what: str) -> ControlPlane: ...

        async def enqueue(self, name: str, *args: Any, **kwargs: Any) -> QueuedTask: ...

    async def _schedule_store(self, what: str) -> TaskStore:
        await self._open()
        store = self._require_plane(what).store
        if not supports_schedules(store):
            raise ConfigurationError(f"{what}: {type(store).__name__} keeps no schedules")
        return store

    def _schedules_changed(self) -> None:
        loop = None if self._worker is None else getattr(self._worker, "schedules", None)
        if loop is not None:
            loop.wake()

    async def schedule(
        self,
        name: str,
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        key: str | None = None,
        timezone: str = "UTC",
        catch_up: str = "latest",
    ) -> ScheduleRecord:
        """Enqueue ``name`` on a cadence, exactly once per tick across every worker.

        ``cron`` (5 or 6 fields, read in ``timezone``) or ``every`` (a
        positive timedelta); ``key`` names the schedule (default: the task
        name), so one task may have several. ``catch_up`` says what ticks
        missed while no worker ran do: ``latest`` (one run for them all),
        ``all`` or ``skip``. Putting a key again with another definition
        changes it; with the same one changes nothing. Every check runs
        before anything is written (:class:`ScheduleInvalid` names the field;
        an unknown task name raises :class:`UnknownTask`).
        """
        from chongming.schedules.cadence import check_catch_up, make_cadence
        from chongming.schedules.loop import ScheduleDraft, put_draft
        from chongming.stores.schedules import check_schedule_key

        cadence = make_cadence(cron=cron, every=every, timezone=timezone)
        policy = check_catch_up(catch_up)
        schedule_key = name if key is None else key
        try:
            check_schedule_key(schedule_key)
        except PayloadError as error:
            raise ScheduleInvalid("key", error.reason) from None
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ScheduleInvalid("kwargs", f"must be a mapping, got {type(kwargs).__name__}")
        if isinstance(args, str | bytes) or not isinstance(args, Sequence):
            raise ScheduleInvalid("args", f"must be a sequence, got {type(args).__name__}")
        store = await self._schedule_store("schedule")
        await self._check_known(store, name)
        try:
            if name in self.registry:
                self.registry.get(name).bind_check(tuple(args), dict(kwargs or {}))
            plain_args, plain_kwargs = json_form_arguments(
                tuple(args), dict(kwargs or {}), self.max_payload_bytes
            )
        except (ConfigurationError, PayloadError) as error:
            raise ScheduleInvalid("args", str(error)) from None
        draft = ScheduleDraft(
            key=schedule_key, task_name=name, cadence=cadence, args=plain_args,
            kwargs=plain_kwargs, catch_up=policy,
        )  # fmt: skip
        stored = await put_draft(store, draft)
        self._schedules_changed()
        return stored

    async def _check_known(self, store: TaskStore, name: str) -> None:
        if name in self.registry:
            return
        served = served_by_live_nodes(await store.nodes())
        if name in served or any(entry.startswith(f"{name}@") for entry in served):
            return
        raise UnknownTask(str(name), tuple(sorted(self.registry)))

    async def schedules(self) -> list[ScheduleRecord]:
        """Every stored schedule, by key."""
        return await (await self._schedule_store("schedules")).schedules()

    async def pause_schedule(self, key: str) -> ScheduleRecord:
        """Fire nothing until resumed."""
        store = await self._schedule_store("pause_schedule")
        return await store.pause_schedule(key, paused=True)

    async def resume_schedule(self, key: str) -> ScheduleRecord:
        """Fire again from the first tick after now: ticks due while paused are skipped."""
        from chongming.schedules.loop import cadence_of

        store = await self._schedule_store("resume_schedule")
        current = await store.get_schedule(key)
        if current is None:
            raise UnknownSchedule(key)
        now = await store.schedule_clock()
        resumed = await store.pause_schedule(
            key, paused=False, next_fire=cadence_of(current).next_after(now)
        )
        self._schedules_changed()
        return resumed

    async def remove_schedule(self, key: str) -> bool:
        """Delete the schedule; what it enqueued stays. A ``@task`` schedule comes back
        when a worker that declares it starts again."""
        store = await self._schedule_store("remove_schedule")
        return await store.remove_schedule(key)

    async def trigger_schedule(self, key: str) -> QueuedTask:
        """Enqueue one run of the schedule now, off its cadence (its ticks are untouched)."""
        import uuid

        store = await self._schedule_store("trigger_schedule")
        current = await store.get_schedule(key)
        if current is None:
            raise UnknownSchedule(key)
        return await self.enqueue(
            current.task_name,
            *current.args,
            label=current.key,
            idempotency_key=f"schedule:{current.key}:manual:{uuid.uuid4().hex}",
            **current.kwargs,
        )
