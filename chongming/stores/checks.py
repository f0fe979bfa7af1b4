"""What every store refuses before writing: the same typed error everywhere.

SQLite keeps NUL inside text and lets lone surrogates fail deep in its driver;
PostgreSQL rejects both. So every backend checks records here first and raises
:class:`~chongming.errors.PayloadError`, and a caller sees the same answer from
each store (docs/reliability.md: "the same typed error on every store").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from chongming.errors import PayloadError
from chongming.state.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_json_value,
    check_label,
    check_payload,
    check_task_id,
)
from chongming.state.records import Failure, Progress, TaskSnapshot, Transition
from chongming.state.status import TaskStatus
from chongming.stores.nodes import Command, NodeInfo

__all__ = [
    "MAX_NODE_TEXT_CHARS",
    "MAX_OUTCOME_CHARS",
    "check_command",
    "check_failure",
    "check_limit_arg",
    "check_made",
    "check_node",
    "check_outcome",
    "check_progress",
    "check_snapshot",
    "check_snapshot_text",
    "check_text",
    "check_time",
    "check_transitions",
    "check_ttl",
]


def check_text(value: object, what: str) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise PayloadError(what, f"must be a string, got {type(value).__name__}")
    check_json_value(value, what)


def check_time(value: object, what: str) -> datetime:
    """An aware datetime. A naive one names no instant, so every store refuses it alike."""
    if type(value) is datetime and value.tzinfo is UTC:
        return value
    if not isinstance(value, datetime):
        raise PayloadError(what, f"must be a datetime, got {type(value).__name__}")
    if value.utcoffset() is None:
        raise PayloadError(
            what, "is a naive datetime (no time zone); pass an aware one, e.g. datetime.now(UTC)"
        )
    return value


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
    for name in _TIME_FIELDS:
        value = getattr(snapshot, name)
        if value is not None or name in _REQUIRED_TIMES:
            check_time(value, name)
    check_progress(snapshot.progress)
    check_failure(snapshot.failure)


def check_made(snapshot: TaskSnapshot) -> None:
    """What a trusted create still checks: the texts the runtime takes as given.

    A run checks its task id, label, tags, arguments, progress and reasons
    where it makes them, makes failure texts storable and stamps aware UTC
    times; the task name (a registration's, or one passed to submit) and the
    bucket key are kept as they came. They never change after the create, so
    a trusted save checks nothing.
    """
    name = snapshot.name
    if not (type(name) is str and name.isascii() and "\x00" not in name):
        check_text(name, "name")
    if snapshot.bucket_key is not None:
        check_text(snapshot.bucket_key, "bucket_key")


def check_failure(failure: Failure | None) -> None:
    if failure is None:
        return
    check_text(failure.message, "failure message")
    check_text(failure.exception_type, "failure exception_type")


_TIME_FIELDS = (
    "created_at",
    "updated_at",
    "queued_at",
    "started_at",
    "finished_at",
    "last_heartbeat_at",
)
_REQUIRED_TIMES = frozenset({"created_at", "updated_at"})


def check_snapshot(snapshot: TaskSnapshot, limit: int | None = DEFAULT_MAX_PAYLOAD_BYTES) -> None:
    """Text fields, and each JSON payload within ``limit`` bytes (``None``: no cap)."""
    check_snapshot_text(snapshot)
    check_payload(snapshot.result, "result", limit)
    if snapshot.args:
        check_payload(list(snapshot.args), "args", limit)
    if snapshot.kwargs:
        check_payload(dict(snapshot.kwargs), "kwargs", limit)


def check_transitions(transitions: Sequence[Transition], checked_id: str | None = None) -> None:
    """Every field of each transition (``checked_id``: a task id the caller checked already)."""
    for transition in transitions:
        if transition.task_id != checked_id:
            check_task_id(transition.task_id)
            checked_id = transition.task_id
        at = transition.at
        if type(at) is not datetime or at.tzinfo is not UTC:
            check_time(at, "transition at")
        if not isinstance(transition.from_status, TaskStatus):
            raise PayloadError("from_status", f"must be a TaskStatus: {transition.from_status!r}")
        if not isinstance(transition.to_status, TaskStatus):
            raise PayloadError("to_status", f"must be a TaskStatus: {transition.to_status!r}")
        _check_word(transition.trigger, "trigger")
        _check_word(transition.actor, "actor")
        if transition.reason is not None:
            check_text(transition.reason, "reason")


#: Triggers and actors come from a small vocabulary: each is checked once per process.
_GOOD_WORDS: set[str] = set()


def _check_word(value: object, what: str) -> None:
    if type(value) is str and value in _GOOD_WORDS:
        return
    if not isinstance(value, str):
        raise PayloadError(what, f"must be a string, got {type(value).__name__}")
    check_text(value, what)
    if len(value) <= 64 and len(_GOOD_WORDS) < 1024:
        _GOOD_WORDS.add(value)


def check_command(command: Command) -> None:
    check_task_id(command.task_id)
    if not isinstance(command.command_id, str) or not command.command_id:
        raise PayloadError("command_id", "must be a non-empty string")
    check_text(command.command_id, "command_id")
    check_time(command.created_at, "command created_at")
    check_text(command.actor, "actor")
    check_text(command.reason, "reason")
    check_text(command.target_owner, "target_owner")


#: The longest command outcome a store keeps (characters).
MAX_OUTCOME_CHARS = 2000
#: The longest owner, host, version or incarnation a node row keeps (characters).
MAX_NODE_TEXT_CHARS = 512
_INT64 = 1 << 63


def _check_capped(value: object, what: str, cap: int, *, empty: bool = True) -> None:
    if not isinstance(value, str):
        raise PayloadError(what, f"must be a string, got {type(value).__name__}")
    check_text(value, what)
    if not empty and not value:
        raise PayloadError(what, "must not be empty")
    if len(value) > cap:
        raise PayloadError(what, f"is {len(value)} characters long; at most {cap} are kept")


def check_outcome(outcome: object) -> None:
    """A command outcome: ``None`` or text without NUL or lone surrogates, capped."""
    if outcome is not None:
        _check_capped(outcome, "command outcome", MAX_OUTCOME_CHARS)


def _check_int(value: object, what: str, low: int, high: int) -> None:
    if type(value) is not int:
        raise PayloadError(what, f"must be an int, got {type(value).__name__}")
    if not low <= value < high:
        raise PayloadError(what, f"must be in [{low}, {high}), got {value}")


def check_node(info: NodeInfo) -> None:
    """Every field of a node row: capped texts, 64-bit ints, buckets within ``num_buckets``."""
    _check_capped(info.owner, "node owner", MAX_NODE_TEXT_CHARS, empty=False)
    _check_capped(info.incarnation, "node incarnation", MAX_NODE_TEXT_CHARS, empty=False)
    _check_capped(info.host, "node host", MAX_NODE_TEXT_CHARS)
    _check_capped(info.version, "node version", MAX_NODE_TEXT_CHARS)
    _check_int(info.pid, "node pid", -_INT64, _INT64)
    _check_int(info.num_buckets, "node num_buckets", 1, 1 << 31)
    if info.owned_buckets is not None:
        if not isinstance(info.owned_buckets, frozenset):
            raise PayloadError("node owned_buckets", "must be a frozenset of ints or None")
        for bucket in info.owned_buckets:
            _check_int(bucket, "node owned bucket", 0, info.num_buckets)
    if not isinstance(info.serves, frozenset):
        raise PayloadError("node serves", "must be a frozenset of 'name' or 'name@N' strings")
    if len(info.serves) > 10_000:
        raise PayloadError("node serves", "at most 10,000 entries")
    for entry in info.serves:
        _check_capped(entry, "node serves entry", MAX_NODE_TEXT_CHARS, empty=False)


def check_ttl(ttl_seconds: object, what: str = "ttl_seconds") -> float:
    """A positive, finite number of seconds (``ConfigurationError`` otherwise)."""
    from chongming.errors import ConfigurationError

    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, int | float)
        or not 0 < ttl_seconds < 10**9
    ):
        raise ConfigurationError(
            f"{what} must be a positive number of seconds, got {ttl_seconds!r}"
        )
    return float(ttl_seconds)


def check_limit_arg(limit: object) -> int:
    """A positive row limit for a listing (``ConfigurationError`` otherwise)."""
    from chongming.errors import ConfigurationError

    if type(limit) is not int or limit < 1:
        raise ConfigurationError(f"limit must be a positive int, got {limit!r}")
    return limit
