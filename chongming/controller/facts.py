"""The facts an enqueue starts its task with: checked before, written with the task."""

from __future__ import annotations

from collections.abc import Mapping

from chongming.errors import ConfigurationError

__all__ = ["check_facts"]


def check_facts(facts: object, connection: object | None) -> None:
    """``enqueue(facts=...)``: a mapping of fact name to JSON value, not inside a transaction."""
    if facts is None:
        return
    if not isinstance(facts, Mapping):
        raise ConfigurationError(f"facts must be a mapping of name to value, got {facts!r}")
    if facts and connection is not None:
        raise ConfigurationError(
            "facts= cannot join the caller's transaction yet; signal them after the commit"
        )
