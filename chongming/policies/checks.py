"""Field checks for the policy records, so every refusal reads the same way.

A policy is built once, often from configuration, and read at the worst
moment (a retry decision, a stop). A bad value must therefore be refused when
the record is built, with a :class:`ConfigurationError` that names the record
and the field: ``ExponentialBackoff.factor must be a number, got '2' (str)``.
``bool`` is never a number here: ``True`` seconds is a typo, not a duration.
"""

from __future__ import annotations

import math

from chongming.errors import ConfigurationError

__all__ = ["check_bool", "check_count", "check_number", "check_seconds", "shown"]

#: Attempt counts are stored as 32-bit integers (PostgreSQL ``integer``).
MAX_COUNT = (1 << 31) - 1
_SHOWN = 60


def shown(value: object) -> str:
    """``repr(value)`` and its type, cut short: a message must stay one readable line."""
    try:
        text = repr(value)
    except Exception:  # e.g. an int past sys.get_int_max_str_digits(); keep the real error
        text = f"<unprintable {type(value).__name__}>"
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    return f"{text} ({type(value).__name__})"


def check_number(owner: str, name: str, value: object) -> float:
    """A finite real number (``int`` or ``float``, never ``bool``); returned as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{owner}.{name} must be a number, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        raise ConfigurationError(f"{owner}.{name} is too large: {shown(value)}") from None
    if not math.isfinite(number):
        raise ConfigurationError(f"{owner}.{name} must be finite, got {value!r}")
    return number


def check_seconds(owner: str, name: str, value: object) -> float:
    """A duration: a finite number of seconds greater than zero."""
    seconds = check_number(owner, name, value)
    if seconds <= 0:
        raise ConfigurationError(f"{owner}.{name} must be > 0 seconds, got {value!r}")
    return seconds


def check_count(owner: str, name: str, value: object, *, minimum: int) -> int:
    """An ``int`` (never ``bool``) within ``[minimum, MAX_COUNT]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{owner}.{name} must be an integer, got {shown(value)}")
    if not minimum <= value <= MAX_COUNT:
        raise ConfigurationError(
            f"{owner}.{name} must be an integer within [{minimum}, {MAX_COUNT}], got {shown(value)}"
        )
    return value


def check_bool(owner: str, name: str, value: object) -> bool:
    """Exactly ``True`` or ``False``: ``"no"`` is truthy, so anything else is refused."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{owner}.{name} must be True or False, got {shown(value)}")
    return value
