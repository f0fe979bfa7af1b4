"""Who did it: the ``actor`` a transition records, checked where callers pass it.

Shared by the run, the control plane and pipelines (below all three).
"""

from __future__ import annotations

from chongming.errors import PayloadError
from chongming.state.payload import check_reason

__all__ = ["check_actor"]


def check_actor(actor: object) -> str:
    """A non-empty string a store can hold; refused with a ``PayloadError`` otherwise."""
    if not isinstance(actor, str) or not actor:
        raise PayloadError("actor", f"must be a non-empty string, got {actor!r}")
    return check_reason(actor, "actor") or actor
