"""Where the runtime reads wall-clock time: injectable so tests can pin timestamps.

Two clocks, each read in one place. Wall time (what records carry) comes from
a :class:`Clock` as float seconds since the epoch; datetimes are built only
when a record is read. Durations and timers use the event loop's own clock
(``loop.time()``), the one ``call_later`` already runs on, so a virtual-time
loop (e.g. the ``looptime`` test plugin) moves timeouts, grace windows and
pause windows together.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "to_datetime"]


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch (UTC): what records carry."""
        ...


class SystemClock:
    __slots__ = ()

    def time(self) -> float:
        return time.time()

    def now(self) -> datetime:
        return datetime.now(UTC)


def to_datetime(seconds: float) -> datetime:
    """A timezone-aware UTC datetime from epoch seconds."""
    return datetime.fromtimestamp(seconds, UTC)


SYSTEM_CLOCK = SystemClock()
