"""Records of the work queue: what an enqueue answers, which tasks a worker serves.

A task enqueued by name carries its recipe in its row (registered name,
version, JSON arguments); any node that owns its bucket and serves its name
and version may claim it. These records are what the store port speaks in for
that; the backends implement the atomic parts (``enqueue``, ``claim``).

A task may also carry a *trace carrier*: the W3C trace context
(``traceparent``, ``tracestate``) current where it was enqueued, a small
str -> str mapping an observer supplies (:mod:`chongming.web.tracing`). The
store writes it with the task, in the same write, and a worker that traces
reads it back after its claim (``TaskStore.trace_carriers``), so the attempt
on another node continues the enqueuer's trace. It is kept beside the task
row, not in the snapshot: nothing but tracing reads it, and a claim of a
worker that does not trace never touches it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence

from chongming.errors import PayloadError
from chongming.state.payload import check_payload, valid_version
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.checks import check_text

__all__ = [
    "AGED_LEVELS",
    "MAX_IDEMPOTENCY_KEY",
    "MAX_TRACE_CARRIER",
    "ClaimedTask",
    "Enqueued",
    "Serves",
    "check_age_step",
    "check_claim",
    "check_enqueued",
    "check_exclude_tags",
    "check_idempotency_key",
    "check_pool_tags",
    "check_start_claimed",
    "check_trace_carrier",
    "decode_trace_carrier",
    "encode_trace_carrier",
    "input_digest",
]

#: Longest idempotency key a store accepts (characters).
MAX_IDEMPOTENCY_KEY = 1000
#: Largest trace carrier a store accepts: its keys and values, UTF-8 bytes in all.
#: A W3C ``traceparent`` is 55 bytes; ``tracestate`` may hold 32 entries of up to ~256.
MAX_TRACE_CARRIER = 1024

#: Name -> the versions a worker has registered (``None`` is the unversioned task).
Serves = Mapping[str, Collection[int | None]]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedTask:
    """A task that ``TaskStore.claim_started`` took and started, as the claimer adopts it.

    ``snapshot`` is the stored row at ``starting`` (owner: the claimer);
    ``history`` is every stored transition, oldest first, ending with the
    ``queued -> starting`` one the claim wrote.
    """

    snapshot: TaskSnapshot
    history: tuple[Transition, ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Enqueued:
    """What ``TaskStore.enqueue`` did: the task as stored, and whether this call made it."""

    snapshot: TaskSnapshot
    created: bool  # False: the idempotency key already named this task, same input


def check_idempotency_key(key: object) -> str:
    if not isinstance(key, str):
        raise PayloadError("idempotency_key", f"must be a string, got {type(key).__name__}")
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise PayloadError("idempotency_key", f"must have 1 to {MAX_IDEMPOTENCY_KEY} characters")
    check_text(key, "idempotency_key")
    if not key.isprintable():
        raise PayloadError("idempotency_key", "must not contain control characters")
    return key


def check_trace_carrier(carrier: object) -> dict[str, str] | None:
    """A trace carrier as a store keeps it: a plain dict, or ``None`` when empty.

    Refused with :class:`PayloadError` (nothing is written): not a mapping,
    a key or value that is not a string (or an empty key, NUL, a lone
    surrogate), more than :data:`MAX_TRACE_CARRIER` UTF-8 bytes in all.
    """
    if carrier is None:
        return None
    if not isinstance(carrier, Mapping):
        raise PayloadError(
            "trace_carrier", f"must be a mapping of str to str, got {type(carrier).__name__}"
        )
    size = 0
    checked: dict[str, str] = {}
    for key, value in carrier.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise PayloadError(
                "trace_carrier", f"holds non-empty str keys and str values, got {key!r}: {value!r}"
            )
        check_text(key, "trace_carrier")
        check_text(value, "trace_carrier")
        size += len(key.encode()) + len(value.encode())
        if size > MAX_TRACE_CARRIER:
            raise PayloadError("trace_carrier", f"must hold at most {MAX_TRACE_CARRIER} bytes")
        checked[key] = value
    return checked or None


def encode_trace_carrier(carrier: Mapping[str, str]) -> str:
    """A checked carrier as stored (canonical JSON text)."""
    return json.dumps(dict(carrier), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decode_trace_carrier(text: str | None) -> dict[str, str] | None:
    """A stored carrier read back; ``None`` when absent or not a JSON object of strings."""
    if text is None:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)} or None


def input_digest(snapshot: TaskSnapshot) -> str:
    """The fingerprint an idempotency key is compared on: name, version and arguments.

    Canonical JSON (sorted keys, no spaces) of values already in their JSON
    form, so the same input gives the same digest in every process and store.
    """
    try:
        text = json.dumps(
            [snapshot.name, snapshot.version, list(snapshot.args), dict(snapshot.kwargs)],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except (TypeError, ValueError, RecursionError) as error:
        # Arguments no store can keep: the shared check names why (as create would).
        check_payload(list(snapshot.args), "args", None)
        check_payload(dict(snapshot.kwargs), "kwargs", None)
        raise PayloadError("arguments", f"cannot be stored ({error})") from None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_claim(
    owner: object,
    serves: object,
    buckets: object,
    limit: object,
    exclude_tags: object = (),
    tags: object = None,
    age_step: object = None,
) -> None:
    """The arguments of ``TaskStore.claim``, refused alike by every backend."""
    if not isinstance(owner, str) or not owner:
        raise PayloadError("owner", "must be a non-empty string")
    check_text(owner, "owner")
    if not isinstance(serves, Mapping):
        raise PayloadError("serves", f"must be a mapping of name to versions, got {serves!r}")
    for name, versions in serves.items():
        if not isinstance(name, str):
            raise PayloadError("serves", f"names are strings, got {name!r}")
        check_text(name, "serves name")
        for version in versions:
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise PayloadError("serves", f"versions are ints or None, got {version!r}")
    if buckets is not None and not _all_ints(buckets):
        raise PayloadError("buckets", f"must be a collection of ints or None, got {buckets!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise PayloadError("limit", f"must be an int >= 1, got {limit!r}")
    check_exclude_tags(exclude_tags)
    check_pool_tags(tags)
    check_age_step(age_step)


#: The most priority levels an aged claim ranks (the highest present).
AGED_LEVELS = 32


def check_start_claimed(owner: object, claimed: object) -> list[tuple[str, int]]:
    """The arguments of ``TaskStore.start_claimed``: each task's id and claimed version."""
    if not isinstance(owner, str) or not owner:
        raise PayloadError("owner", "must be a non-empty string")
    check_text(owner, "owner")
    if isinstance(claimed, (str, bytes)) or not isinstance(claimed, Sequence):
        raise PayloadError("claimed", f"must be a sequence of task snapshots, got {claimed!r}")
    pairs: list[tuple[str, int]] = []
    for task in claimed:
        if not isinstance(task, TaskSnapshot):
            raise PayloadError("claimed", f"holds task snapshots, got {task!r}")
        pairs.append((task.task_id, task.status_version))
    if len({task_id for task_id, _ in pairs}) != len(pairs):
        raise PayloadError("claimed", "names a task twice")
    return pairs


def check_age_step(step: object) -> float | None:
    """``age_step`` of a claim: seconds per priority level gained by waiting (``None``: off)."""
    if step is None:
        return None
    if (
        isinstance(step, bool)
        or not isinstance(step, int | float)
        or not 0.001 <= step <= 10**9  # also refuses NaN
    ):
        raise PayloadError("age_step", f"must be seconds from 0.001 to 1e9, or None; got {step!r}")
    return float(step)


def check_exclude_tags(tags: object, what: str = "exclude_tags") -> list[str]:
    """``exclude_tags`` of a claim as a sorted list: non-empty strings, never a bare string."""
    if isinstance(tags, str) or not isinstance(tags, Collection):
        raise PayloadError(what, f"must be a collection of tag strings, got {type(tags).__name__}")
    for tag in tags:
        if not isinstance(tag, str) or not tag:
            raise PayloadError(what, f"tags are non-empty strings, got {tag!r}")
        check_text(tag, what)
    return sorted(set(tags))


def check_pool_tags(tags: object) -> list[str] | None:
    """``tags`` of a claim (a pool: one of them must be on the task), sorted; ``None``: any.

    An empty collection is refused: it would match nothing, so the worker
    would claim nothing and say nothing about why.
    """
    if tags is None:
        return None
    checked = check_exclude_tags(tags, "tags")
    if not checked:
        raise PayloadError("tags", "must name at least one tag (None: claim whatever it serves)")
    return checked


def _all_ints(values: object) -> bool:
    return isinstance(values, Collection) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    )


def check_enqueued(snapshot: TaskSnapshot) -> None:
    """What an enqueued row must hold beyond any created row's checks."""
    if snapshot.idempotency_key is not None:
        check_idempotency_key(snapshot.idempotency_key)
    version = snapshot.version
    if version is not None and not valid_version(version):
        raise PayloadError("version", f"must be an int from 0 to 2**31 - 1, got {version!r}")
