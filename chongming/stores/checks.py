"""What every store refuses before writing: the same typed error everywhere.

SQLite keeps NUL inside text and lets lone surrogates fail deep in its driver;
PostgreSQL rejects both. So every backend checks records here first and raises
:class:`~chongming.errors.PayloadError`, and a caller sees the same answer from
each store (RELIABILITY.md: "the same typed error on every store").
"""

from __future__ import annotations

from collections.abc import Sequence

from chongming.errors import PayloadError
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_json_value,
    check_label,
    check_payload,
    check_task_id,
)
from chongming.state.records import Progress, TaskSnapshot, Transition
from chongming.stores.base import Command

__all__ = [
    "check_command",
    "check_progress",
    "check_snapshot",
    "check_snapshot_text",
    "check_text",
    "check_transitions",
]


def check_text(value: object, what: str) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise PayloadError(what, f"must be a string, got {type(value).__name__}")
    check_json_value(value, what)


def check_progress(progress: Progress | None) -> None:
    if progress is None:
        return
    for what, number in (("progress done", progress.done), ("progress total", progress.total)):
        if number is not None:
            check_json_value(number, what)
    check_text(progress.unit, "progress unit")
    check_text(progress.message, "progress message")


def check_snapshot_text(snapshot: TaskSnapshot) -> None:
    """Every text field; the JSON fields are the caller's (it may check the encoded text)."""
    check_task_id(snapshot.task_id)
    check_text(snapshot.name, "name")
    check_label(snapshot.label)
    check_text(snapshot.bucket_key, "bucket_key")
    check_text(snapshot.owner, "owner")
    for tag in snapshot.tags:
        check_text(tag, "tag")
    check_progress(snapshot.progress)
    failure = snapshot.failure
    if failure is not None:
        check_text(failure.message, "failure message")
        check_text(failure.exception_type, "failure exception_type")


def check_snapshot(snapshot: TaskSnapshot, limit: int | None = DEFAULT_MAX_PAYLOAD_BYTES) -> None:
    """Text fields, and each JSON payload within ``limit`` bytes (``None``: no cap)."""
    check_snapshot_text(snapshot)
    check_payload(snapshot.result, "result", limit)
    if snapshot.args:
        check_payload(list(snapshot.args), "args", limit)
    if snapshot.kwargs:
        check_payload(dict(snapshot.kwargs), "kwargs", limit)


def check_transitions(transitions: Sequence[Transition]) -> None:
    for transition in transitions:
        check_task_id(transition.task_id)
        check_text(transition.trigger, "trigger")
        check_text(transition.actor, "actor")
        check_text(transition.reason, "reason")


def check_command(command: Command) -> None:
    check_task_id(command.task_id)
    if not isinstance(command.command_id, str) or not command.command_id:
        raise PayloadError("command_id", "must be a non-empty string")
    check_text(command.command_id, "command_id")
    check_text(command.actor, "actor")
    check_text(command.reason, "reason")
    check_text(command.target_owner, "target_owner")
