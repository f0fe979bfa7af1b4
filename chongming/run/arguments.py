"""What a run's callers pass beside the task's own arguments: tags and actors, checked first.

Refused with a typed error naming the field before anything is built.
"""

from __future__ import annotations

from collections.abc import Collection

from chongming.errors import ConfigurationError, PayloadError
from chongming.state.payload import check_reason

__all__ = ["check_actor", "check_tags"]


def check_tags(tags: Collection[str]) -> frozenset[str]:
    """Tags as a frozenset of non-empty strings; a bare string is refused."""
    if isinstance(tags, str):
        raise ConfigurationError("tags must be a collection of strings, not a single string")
    result = frozenset(tags)
    for tag in result:
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"tags must be non-empty strings, got {tag!r}")
        check_reason(tag, "tag")
    return result


def check_actor(actor: object) -> str:
    if not isinstance(actor, str) or not actor:
        raise PayloadError("actor", f"must be a non-empty string, got {actor!r}")
    return check_reason(actor, "actor") or actor
