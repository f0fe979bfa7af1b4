"""Records of the work queue: what an enqueue answers, which tasks a worker serves.

A task enqueued by name carries its recipe in its row (registered name,
version, JSON arguments); any node that owns its bucket and serves its name
and version may claim it. These records are what the store port speaks in for
that; the backends implement the atomic parts (``enqueue``, ``claim``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Mapping

from chongming.errors import PayloadError
from chongming.state.payload import valid_version
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.checks import check_text

__all__ = [
    "MAX_IDEMPOTENCY_KEY",
    "ClaimedTask",
    "Enqueued",
    "Serves",
    "check_claim",
    "check_enqueued",
    "check_exclude_tags",
    "check_idempotency_key",
    "input_digest",
]

#: Longest idempotency key a store accepts (characters).
MAX_IDEMPOTENCY_KEY = 1000

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


def input_digest(snapshot: TaskSnapshot) -> str:
    """The fingerprint an idempotency key is compared on: name, version and arguments.

    Canonical JSON (sorted keys, no spaces) of values already in their JSON
    form, so the same input gives the same digest in every process and store.
    """
    text = json.dumps(
        [snapshot.name, snapshot.version, list(snapshot.args), dict(snapshot.kwargs)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_claim(
    owner: object, serves: object, buckets: object, limit: object, exclude_tags: object = ()
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


def check_exclude_tags(tags: object) -> list[str]:
    """``exclude_tags`` of a claim as a sorted list: non-empty strings, never a bare string."""
    if isinstance(tags, str) or not isinstance(tags, Collection):
        raise PayloadError(
            "exclude_tags", f"must be a collection of tag strings, got {type(tags).__name__}"
        )
    for tag in tags:
        if not isinstance(tag, str) or not tag:
            raise PayloadError("exclude_tags", f"tags are non-empty strings, got {tag!r}")
        check_text(tag, "exclude_tags")
    return sorted(set(tags))


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
