"""What an enqueue writes: the checked row of a ``queued`` task and its first transition.

Pure of the store: every check of ``Controller.enqueue`` and ``enqueue_many``
(the name, the arguments against a registered function, ids, labels,
priority, tags, version, idempotency keys) happens here, before anything is
written; :mod:`chongming.controller.enqueue` writes what this builds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming.clock import Clock, to_datetime
from chongming.errors import ConfigurationError, PayloadError
from chongming.run.lifecycle import check_tags
from chongming.state.ids import new_task_id
from chongming.state.payload import (
    check_label,
    check_task_id,
    json_form_arguments,
    valid_version,
)
from chongming.state.records import TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.state.triggers import Trigger
from chongming.stores.queue import check_idempotency_key
from chongming.task_api.registry import TaskRegistry, check_task_name

__all__ = ["ENQUEUED", "EnqueueRequest", "build_enqueued", "build_enqueued_many"]

#: The trigger of an enqueued task's first transition.
ENQUEUED = Trigger.ENQUEUED
_BOUND = 2**31


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueRequest:
    """Everything ``Controller.enqueue`` was given, before any check."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    task_id: str | None = None
    label: str | None = None
    bucket: int | None = None
    bucket_key: str | None = None
    priority: int | None = None
    tags: Collection[str] | None = None
    not_before: datetime | None = None
    idempotency_key: str | None = None
    version: int | None = None


def build_enqueued(
    request: EnqueueRequest,
    registry: TaskRegistry,
    clock: Clock,
    limit: int | None,
) -> tuple[TaskSnapshot, Transition]:
    """The row and first transition of an enqueued task; every check happens here.

    A name this process has registered is checked against its function
    (arguments that do not fit are refused now) and lends its tags, priority
    and, when none is given, its highest registered version. A name it has
    not registered is accepted: the task waits, visibly ``queued`` with no
    owner, until a worker that serves it starts.
    """
    name = check_task_name(request.name)
    spec = None
    if name in registry:
        versions = registry.versions(name)
        if request.version is None or request.version in versions:
            spec = registry.get(name, request.version)
    if spec is not None:
        spec.bind_check(request.args, request.kwargs)
    args, kwargs = json_form_arguments(request.args, request.kwargs, limit)
    task_id = new_task_id() if request.task_id is None else check_task_id(request.task_id)
    label = name if request.label is None else check_label(request.label)
    priority = request.priority if request.priority is not None else (spec.priority if spec else 0)
    if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) >= _BOUND:
        raise ConfigurationError(f"priority must be an int below 2**31 in size, got {priority!r}")
    tags = frozenset(spec.tags if spec else ()) | (
        check_tags(request.tags) if request.tags is not None else frozenset()
    )
    # Unversioned enqueue of a name registered here with versions: this process's highest.
    version = request.version if request.version is not None else (spec.version if spec else None)
    if version is not None and not valid_version(version):
        raise ConfigurationError(f"version must be an int from 0 to 2**31 - 1, got {version!r}")
    not_before = request.not_before
    if not_before is not None:
        if not isinstance(not_before, datetime):
            raise ConfigurationError(
                f"not_before must be an aware datetime, got {type(not_before).__name__}"
            )
        if not_before.tzinfo is None or not_before.utcoffset() is None:
            raise ConfigurationError(
                "not_before must be an aware datetime (a naive one names no instant)"
            )
    key = request.idempotency_key
    if key is not None:
        try:
            check_idempotency_key(key)
        except PayloadError as error:
            raise ConfigurationError(f"idempotency_key {error.reason}") from None
    now = to_datetime(clock.time())
    transition = Transition(
        task_id=task_id,
        version=1,
        from_status=TaskStatus.PENDING,
        to_status=TaskStatus.QUEUED,
        at=now,
        trigger=ENQUEUED,
        actor="system",
    )
    snapshot = TaskSnapshot(
        task_id=task_id,
        name=name,
        label=label,
        status=TaskStatus.QUEUED,
        status_version=1,
        attempt=0,
        max_attempts=spec.retry.max_attempts if spec and spec.retry else 1,
        created_at=now,
        updated_at=now,
        bucket=request.bucket,
        bucket_key=request.bucket_key,
        tags=tags,
        priority=priority,
        owner=None,
        queued_at=now,
        args=args,
        kwargs=kwargs,
        version=version,
        not_before=not_before,
        idempotency_key=key,
    )
    return snapshot, transition


def build_enqueued_many(
    template: EnqueueRequest,
    calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]],
    keys: Sequence[str | None] | None,
    registry: TaskRegistry,
    clock: Clock,
    limit: int | None,
) -> list[tuple[TaskSnapshot, Transition]]:
    """The rows of one bulk enqueue: what the calls share is checked once.

    The first call goes through :func:`build_enqueued` with every check; each
    other call shares its name, version, label, priority, tags, bucket and
    earliest start and checks only its own arguments and key. Each task gets
    its own id and its own reading of the clock (claims take the oldest first).
    """
    if keys is not None and len(keys) != len(calls):
        raise ConfigurationError(
            f"idempotency_keys must give one key (or None) per call: {len(keys)} for "
            f"{len(calls)} calls"
        )
    built: list[tuple[TaskSnapshot, Transition]] = []
    if not calls:
        return built
    first_args, first_kwargs = calls[0]
    first = build_enqueued(
        dataclasses.replace(
            template,
            args=tuple(first_args),
            kwargs=dict(first_kwargs),
            idempotency_key=None if keys is None else keys[0],
        ),
        registry,
        clock,
        limit,
    )
    built.append(first)
    shape = first[0]
    spec = None
    if shape.name in registry and (
        shape.version is None or shape.version in registry.versions(shape.name)
    ):
        spec = registry.get(shape.name, shape.version)
    name, label, max_attempts = shape.name, shape.label, shape.max_attempts
    bucket, bucket_key, tags, priority = shape.bucket, shape.bucket_key, shape.tags, shape.priority
    version, not_before, queued = shape.version, shape.not_before, TaskStatus.QUEUED
    for index in range(1, len(calls)):
        args, kwargs = calls[index]
        args, kwargs = tuple(args), dict(kwargs)
        if spec is not None:
            spec.bind_check(args, kwargs)
        args, kwargs = json_form_arguments(args, kwargs, limit)
        key = None if keys is None else keys[index]
        if key is not None:
            try:
                check_idempotency_key(key)
            except PayloadError as error:
                raise ConfigurationError(f"idempotency_key {error.reason}") from None
        task_id = new_task_id()
        now = to_datetime(clock.time())
        snapshot = TaskSnapshot(  # the first one's fields (built directly: no replace())
            task_id=task_id,
            name=name,
            label=label,
            status=queued,
            status_version=1,
            attempt=0,
            max_attempts=max_attempts,
            created_at=now,
            updated_at=now,
            bucket=bucket,
            bucket_key=bucket_key,
            tags=tags,
            priority=priority,
            queued_at=now,
            args=args,
            kwargs=kwargs,
            version=version,
            not_before=not_before,
            idempotency_key=key,
        )
        transition = Transition(
            task_id=task_id,
            version=1,
            from_status=TaskStatus.PENDING,
            to_status=TaskStatus.QUEUED,
            at=now,
            trigger=ENQUEUED,
            actor="system",
        )
        built.append((snapshot, transition))
    return built
