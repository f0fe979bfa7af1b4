"""A task module whose register() raises."""

from __future__ import annotations

from typing import Any


def register(controller: Any) -> None:
    raise LookupError("no such configuration")
