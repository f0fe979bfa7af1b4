"""When a durable task's long sleep or wait parks it in the queue instead of holding a slot.

Light on purpose: the controller reads these at construction without
importing the durable journal.
"""

from __future__ import annotations

from chongming.errors import ConfigurationError

__all__ = ["PARK_AFTER", "check_park_threshold"]

#: The default park threshold (``Controller(park_threshold=...)``): on a worker, a
#: durable sleep or fact wait with this long (seconds) or more to go parks the task.
PARK_AFTER = 5.0


def check_park_threshold(value: object) -> float:
    """Seconds >= 0 (``math.inf``: never park), or :class:`ConfigurationError`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigurationError(
            "Controller.park_threshold must be a number of seconds >= 0 "
            f"(math.inf: never park), got {value!r}"
        )
    return float(value)
