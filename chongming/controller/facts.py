"""The facts an enqueue starts its task with: checked before, written right after."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chongming.errors import ConfigurationError
from chongming.stores.base import TaskStore
from chongming.stores.durable import Fact

__all__ = ["check_facts", "send_facts"]


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


async def send_facts(store: TaskStore, task_id: str, facts: Mapping[str, Any] | None) -> None:
    for name, payload in (facts or {}).items():
        await store.put_fact(Fact(task_id=task_id, name=name, payload=payload))
