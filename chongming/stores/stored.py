"""The form in which every store gives a record back: the oracle of "is this what I wrote?".

An SQL store reads back UTC datetimes and payloads in their JSON form (a
tuple becomes a list, an int key a string). The in-memory store keeps
records in that form so it answers like the others, and every store compares
a re-read against it after a write whose outcome it could not tell.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC

from chongming.state.payload import json_form
from chongming.state.records import TaskSnapshot, Transition
from chongming.stores.checks import check_snapshot_text
from chongming.stores.codec import encode_failure, encode_progress

__all__ = ["as_stored", "utc_transition"]

_TIME_FIELDS = (
    "created_at",
    "updated_at",
    "queued_at",
    "started_at",
    "finished_at",
    "last_heartbeat_at",
)


def as_stored(snapshot: TaskSnapshot, limit: int | None) -> TaskSnapshot:
    """Checked, with UTC datetimes and JSON-form payloads: what an SQL store reads back."""
    check_snapshot_text(snapshot)
    encode_progress(snapshot.progress, limit)  # the same checks and cap as the SQL stores
    encode_failure(snapshot.failure, limit)
    changes: dict[str, object] = {}
    for name in _TIME_FIELDS:
        value = getattr(snapshot, name)
        if value is not None and value.tzinfo is not UTC:
            changes[name] = value.astimezone(UTC)
    result = snapshot.result
    if result is not None:
        changes["result"] = json_form(result, "result", limit)
    if snapshot.args:
        changes["args"] = tuple(json_form(list(snapshot.args), "args", limit))
    elif type(snapshot.args) is not tuple:
        changes["args"] = ()
    if snapshot.kwargs:
        changes["kwargs"] = json_form(dict(snapshot.kwargs), "kwargs", limit)
    elif type(snapshot.kwargs) is not dict:
        changes["kwargs"] = {}
    return dataclasses.replace(snapshot, **changes) if changes else snapshot  # type: ignore[arg-type]


def utc_transition(transition: Transition) -> Transition:
    if transition.at.tzinfo is UTC:
        return transition
    return dataclasses.replace(transition, at=transition.at.astimezone(UTC))
