"""Where the runtime reads time: injectable so tests can pin timestamps."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC: what records carry."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: what durations use."""
        ...


class SystemClock:
    __slots__ = ()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
